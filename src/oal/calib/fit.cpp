#include "oal/calib/fit.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "oal/calib/adam.h"
#include "oal/core/error.h"

namespace oal::calib {
namespace {

constexpr std::string_view k_op = "fit";

uint64_t next_random(uint64_t& s) {  // splitmix64 step
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<at::Tensor> snapshot(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone());
  return out;
}

void restore(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& values) {
  at::NoGradGuard g;
  for (size_t i = 0; i < params.size(); ++i) params[i].copy_(values[i]);
}

}  // namespace

FitSettings FitSettings::short_run(int64_t updates) {
  FitSettings f;
  f.max_updates = updates;
  f.val_every = std::max<int64_t>(1, updates / 4);
  f.patience = updates;
  return f;
}

void FitSettings::validate() const {
  check(std::isfinite(lr) && lr > 0 && std::isfinite(clip) && clip > 0, k_op,
        "lr ({}) and clip ({}) must be positive and finite", lr, clip);
  check(positions > 0 && max_updates >= 0 && val_every > 0 && patience > 0, k_op,
        "positions ({}), val_every ({}), patience ({}) must be > 0 and max_updates ({}) >= 0",
        positions, val_every, patience, max_updates);
}

std::vector<int64_t> sample_positions(int64_t length, int64_t count, uint64_t& rng_state) {
  std::vector<int64_t> all(length);
  std::iota(all.begin(), all.end(), 0);
  if (count >= length) return all;
  // Partial Fisher–Yates with our own generator (std distributions differ across
  // standard libraries; this keeps "same seed, same numbers" portable).
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = i + static_cast<int64_t>(next_random(rng_state) % uint64_t(length - i));
    std::swap(all[i], all[j]);
  }
  all.resize(count);
  std::sort(all.begin(), all.end());
  return all;
}

double validation_mse(const FitProblem& problem, const FitData& data) {
  at::NoGradGuard g;
  double total = 0;
  const int64_t n = data.q_val.size(0);
  for (int64_t b = 0; b < n; ++b) {
    auto sl = [b](const at::Tensor& t) { return t.narrow(0, b, 1); };
    at::Tensor y = problem.outputs(sl(data.q_val), sl(data.k_val), sl(data.v_val));
    total += (y.to(at::kDouble) - sl(data.y_val).to(at::kDouble)).pow(2).mean().item<double>();
  }
  const double mse = total / double(n);
  check(std::isfinite(mse), k_op, "validation MSE is not finite");
  return mse;
}

FitResult fit(const FitProblem& problem, const FitData& data, const FitSettings& settings,
              uint64_t seed) {
  settings.validate();
  check(data.q_train.size(0) > 0 && data.q_val.size(0) > 0, k_op,
        "need at least one training and one validation sequence");
  FitResult r;
  r.initial_val = r.best_val = validation_mse(problem, data);
  r.history.push_back({0, r.best_val});
  r.best = snapshot(problem.params);
  Adam adam(problem.params, settings.lr);
  uint64_t rng = seed;
  const int64_t n_train = data.q_train.size(0), T = data.q_train.size(2);
  for (int64_t u = 1; u <= settings.max_updates; ++u) {
    const int64_t b = static_cast<int64_t>(next_random(rng) % uint64_t(n_train));
    std::vector<int64_t> pos = sample_positions(T, settings.positions, rng);
    auto sl = [b](const at::Tensor& t) { return t.narrow(0, b, 1); };
    at::Tensor y_hat =
        problem.outputs_at(sl(data.q_train), sl(data.k_train), sl(data.v_train), pos);
    at::Tensor y =
        sl(data.y_train).index_select(2, at::tensor(pos, at::kLong)).to(y_hat.scalar_type());
    at::Tensor loss = 0.5 * (y_hat - y).pow(2).sum();
    check(std::isfinite(loss.item<double>()), k_op, "training loss is not finite at update {}", u);
    adam.zero_grad();
    loss.backward();
    clip_grad_norm(problem.params, settings.clip);
    adam.step();
    r.updates = u;
    if (u % settings.val_every != 0) continue;
    const double val = validation_mse(problem, data);
    r.history.push_back({u, val});
    if (val < r.best_val) {
      r.best_val = val;
      r.best_update = u;
      r.best = snapshot(problem.params);
    }
    if (u - r.best_update >= settings.patience) break;
  }
  adam.zero_grad();
  restore(problem.params, r.best);
  return r;
}

}  // namespace oal::calib
