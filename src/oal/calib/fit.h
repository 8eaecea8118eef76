#pragma once
// The output-matching fitter of paper Eq. 20 / App. B, generic over what is fitted.
//
// A FitProblem is one independent fit (a query head, or a whole layer when parameters
// are shared across heads): trainable fp32 leaves and two evaluations of the method's
// normalised causal output on frozen q, k, v. Per update: one training sequence drawn
// uniformly, `positions` distinct causal query positions drawn uniformly from [0, T)
// (sorted), loss = ½ Σ_positions Σ_heads,dims (ŷ − y_softmax)² (Eq. 20 with |C| = 1),
// backward, global grad-norm clip, Adam step. Validation every `val_every` updates (and
// once before the first) is the MSE over every position, head and output dim of the
// validation sequences (mean over sequences); the best checkpoint is kept and the fit
// stops once `patience` updates pass without improvement, or after `max_updates`.
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace oal::calib {

struct FitSettings {
  double lr = 0.02;          // Adam learning rate, no schedule
  double clip = 10.0;        // grad-norm clip
  int64_t positions = 32;    // sampled query positions per update
  int64_t max_updates = 1000;
  int64_t val_every = 100;
  int64_t patience = 400;    // updates without validation improvement before stopping
  // Throws oal::Error("fit") unless every field is positive (lr, clip finite).
  void validate() const;
  // A short fit of `updates` updates (the demo's): validated four times, no early stop.
  static FitSettings short_run(int64_t updates);
};

// Frozen tensors of one problem: q [N, H, T, D], k [N, Hkv, T, D], v [N, Hkv, T, Dv],
// y [N, H, T, Dv] (softmax outputs), for the training and validation sequences.
struct FitData {
  at::Tensor q_train, k_train, v_train, y_train;
  at::Tensor q_val, k_val, v_val, y_val;
};

struct FitProblem {
  std::vector<at::Tensor> params;  // fp32 leaves, requires_grad
  // Differentiable outputs at sorted positions: (q, k, v of one sequence [1, ...],
  // positions) -> [1, H, P, Dv].
  std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           const std::vector<int64_t>&)>
      outputs_at;
  // Outputs at every position, no gradient needed: (q, k, v [N, ...]) -> [N, H, T, Dv].
  std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)> outputs;
};

struct FitResult {
  std::vector<at::Tensor> best;  // parameter values at the best validation checkpoint
  double best_val = 0, initial_val = 0;
  int64_t best_update = 0;       // 0 = the initial parameters
  int64_t updates = 0;           // updates performed before stopping
  std::vector<std::pair<int64_t, double>> history;  // (update, validation MSE)
};

// Validation MSE of `problem` at its current parameters.
double validation_mse(const FitProblem& problem, const FitData& data);

// Runs the fit; sampling is driven by `seed` only (same seed, same numbers). On return
// the problem's parameters hold the best checkpoint. Throws oal::Error("fit") on a
// non-finite loss or validation value.
FitResult fit(const FitProblem& problem, const FitData& data, const FitSettings& settings,
              uint64_t seed);

// `count` distinct positions from [0, length), sorted (all of them when count >= length).
std::vector<int64_t> sample_positions(int64_t length, int64_t count, uint64_t& rng_state);

}  // namespace oal::calib
