#include "oal/attention/windowed/windowed_reference.h"

#include <cmath>
#include <limits>

#include "oal/attention/baselines/feature_linear.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {

at::Tensor windowed_log_weights(const at::Tensor& scores, const at::Tensor& log_kappa,
                                const at::Tensor& log_scale, const Window& window,
                                const std::vector<int64_t>& positions) {
  constexpr std::string_view op = "windowed_log_weights";
  window.validate(op);
  check_dim(scores, 4, op, "scores [B, Hq, P, T]");
  const int64_t Hq = scores.size(1), P = scores.size(2), T = scores.size(3);
  check(int64_t(positions.size()) == P, op, "{} positions for {} query rows", positions.size(), P);
  check(log_scale.numel() == Hq, op, "log_scale has {} values for {} query heads",
        log_scale.numel(), Hq);
  check(!log_kappa.defined() || log_kappa.sizes() == scores.sizes(), op,
        "log_kappa {} and scores {} disagree", shape_str(log_kappa), shape_str(scores));
  const auto dev = scores.device();
  at::Tensor qpos = at::tensor(positions, at::kLong).to(dev);
  at::Tensor kpos = at::arange(T, at::TensorOptions().dtype(at::kLong).device(dev));
  at::Tensor exact = exact_mask(qpos, kpos, window);  // [P, T]
  const double ninf = -std::numeric_limits<double>::infinity();
  at::Tensor lw = scores - log_scale.to(scores.scalar_type()).view({1, Hq, 1, 1});
  lw = lw.masked_fill(exact.logical_not(), ninf);
  if (log_kappa.defined())
    lw = at::where(linear_mask(qpos, kpos, window), log_kappa.to(scores.scalar_type()), lw);
  return lw;
}

at::Tensor windowed_pairwise(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& kappa, const at::Tensor& log_scale,
                             const Window& window) {
  constexpr std::string_view op = "windowed_pairwise";
  check_dim(q, 4, op, "q [B, Hq, T, D]");
  check_dim(k, 4, op, "k [B, Hkv, T, D]");
  const int64_t Hq = q.size(1), T = q.size(2);
  check(k.size(2) == T && q.size(1) % k.size(1) == 0, op, "q {} and k {} disagree",
        shape_str(q), shape_str(k));
  auto qd = q.to(at::kDouble), kd = expand_kv_heads(k.to(at::kDouble), Hq);
  at::Tensor scores = at::matmul(qd, kd.transpose(-1, -2)) / std::sqrt(double(q.size(3)));
  at::Tensor log_kappa;
  if (kappa.defined()) log_kappa = kappa.to(at::kDouble).log();
  std::vector<int64_t> all(T);
  for (int64_t i = 0; i < T; ++i) all[i] = i;
  at::Tensor lw = windowed_log_weights(scores, log_kappa, log_scale.to(at::kDouble), window, all);
  return log_kernel_attention(lw, v.to(at::kDouble), all);
}

}  // namespace oal::attn
