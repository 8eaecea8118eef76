#include "oal/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "oal/core/error.h"

namespace oal::train {

void LrSchedule::validate() const {
  check(std::isfinite(base_lr) && base_lr > 0, "lr_schedule", "base lr must be > 0, got {}",
        base_lr);
  check(total_steps >= 1, "lr_schedule", "total steps must be >= 1, got {}", total_steps);
  check(warmup_fraction >= 0 && warmup_fraction < 1, "lr_schedule",
        "warm-up fraction must be in [0, 1), got {}", warmup_fraction);
}

int64_t LrSchedule::warmup_steps() const {
  const auto w = static_cast<int64_t>(std::ceil(warmup_fraction * double(total_steps) - 1e-9));
  return std::clamp<int64_t>(w, 1, total_steps);
}

double LrSchedule::lr(int64_t step) const {
  check(step >= 0 && step < total_steps, "lr_schedule", "step {} outside [0, {})", step,
        total_steps);
  const int64_t w = warmup_steps();
  if (step < w) return base_lr * double(step + 1) / double(w);
  const int64_t decay = total_steps - w;
  const double progress = decay > 0 ? double(step - w) / double(decay) : 0.0;
  return base_lr * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace oal::train
