#pragma once
// Learning-rate schedule of the paper's LoRA runs (App. F.2): linear warm-up over the
// first 5% of updates, then cosine decay. LibTorch 1.13 has no such scheduler, so the
// trainer sets the learning rate by hand before every update.
//
// Update u (0-based) of N, W = ceil(warmup_fraction · N) warm-up updates (at least 1):
//   u <  W:  lr = base · (u + 1) / W                          (reaches base at u = W-1)
//   u >= W:  lr = base · ½ (1 + cos(π (u - W) / (N - W)))     (base at u = W, > 0 at N-1)
// Unlike HF's get_cosine_schedule_with_warmup the first update is not spent at lr 0.
#include <cstdint>

namespace oal::train {

struct LrSchedule {
  double base_lr = 5e-4;
  int64_t total_steps = 1;
  double warmup_fraction = 0.05;

  // Throws oal::Error("[lr_schedule] ...") for base_lr <= 0, total_steps < 1 or a
  // fraction outside [0, 1).
  void validate() const;
  int64_t warmup_steps() const;
  // Learning rate of update `step` (0-based, < total_steps).
  double lr(int64_t step) const;
};

}  // namespace oal::train
