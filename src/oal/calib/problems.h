#pragma once
// FitProblems for every trainable method (see fit.h), and reading the fitted values
// back into methods. Per query head: OAL / learned global (L), TaylorShift (tau),
// DiJiang (theta); per layer (parameters shared by its heads): SpectraFormer (B, G, S).
#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "oal/attention/baselines/dijiang.h"
#include "oal/attention/baselines/spectraformer.h"
#include "oal/attention/baselines/taylorshift.h"
#include "oal/attention/oal/quadratic.h"
#include "oal/attention/windowed/window.h"
#include "oal/calib/fit.h"

namespace oal::calib {

// kappa = eps + ||Lᵀ s̄||² between query rows and all keys, differentiable in L:
// q_rows [B, 1, P, D], k [B, 1, T, D], group_of [D] (values 0..G-1), L [G+1, G+1]
// (lower triangle used) -> [B, 1, P, T] in q's dtype.
at::Tensor quadratic_weights(const at::Tensor& q_rows, const at::Tensor& k,
                             const at::Tensor& group_onehot, const at::Tensor& L, double eps);

// One head's OAL (or G = 1 global) problem starting from `init`; the problem's single
// parameter is L [G+1, G+1] fp32. kernel_from() turns fitted values back into a kernel.
struct QuadraticProblem {
  FitProblem problem;
  std::vector<std::vector<int64_t>> groups;
  double eps = 0;
  attn::QuadraticKernel kernel_from(const std::vector<at::Tensor>& values) const;
};
QuadraticProblem quadratic_problem(const attn::QuadraticKernel& init);
// The same head beside an exact window (attention/windowed/): parameters L and c_h [1]
// (fp32, from `log_scale0`), outputs by the windowed formula's log-weights over the
// sampled rows (windowed_reference.h), so L and c_h are fitted jointly (Eq. 20 on the
// windowed output).
QuadraticProblem windowed_quadratic_problem(const attn::QuadraticKernel& init, double log_scale0,
                                            const attn::Window& window);

// The feature-map baselines. With a window (not none) each problem also fits c_h, one per
// query head of the problem's method, from `log_scale0`, jointly with the method's own
// parameters on the windowed output (the last parameter is c_h).
//
// One head of TaylorShift (tau [1], from `tau0`) / DiJiang (theta [1, D] from `theta0`
// with the layer's fixed projection); the problem owns a one-head method.
FitProblem taylorshift_problem(double tau0, int64_t head_dim, const attn::Window& window = {},
                               double log_scale0 = 0);
FitProblem dijiang_problem(const at::Tensor& projection, const at::Tensor& theta0,
                           const attn::Window& window = {}, double log_scale0 = 0);
// A whole layer of SpectraFormer, starting from `init` (its B, G, S are cloned into
// fresh leaves, its permutation kept).
FitProblem spectraformer_problem(const attn::SpectraFormerAttention& init,
                                 const attn::Window& window = {}, double log_scale0 = 0);
// A whole layer of a method with nothing of its own to fit (Performer's fixed draws)
// beside a window: c_h [Hq] alone. Throws oal::Error("calibrate") without a window.
FitProblem fixed_feature_problem(std::shared_ptr<attn::FeatureMapMethod> method,
                                 const attn::Window& window, double log_scale0);

}  // namespace oal::calib
