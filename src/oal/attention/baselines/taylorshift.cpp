#include "oal/attention/baselines/taylorshift.h"

#include "oal/core/error.h"

namespace oal::attn {

at::Tensor unit_rows(const at::Tensor& x) {
  return x / x.norm(2, {-1}, true).clamp_min(1e-30);
}

TaylorShiftAttention::TaylorShiftAttention(at::Tensor tau, int64_t kv_heads, int64_t head_dim,
                                           int64_t chunk)
    : FeatureMapMethod(tau.numel(), kv_heads, head_dim, chunk), tau_(std::move(tau)) {
  check(tau_.dim() == 1, names::taylorshift, "tau must be [Hq], got {} dims", tau_.dim());
}

std::shared_ptr<TaylorShiftAttention> TaylorShiftAttention::init(int64_t q_heads,
                                                                 int64_t kv_heads,
                                                                 int64_t head_dim) {
  return std::make_shared<TaylorShiftAttention>(at::ones({q_heads}, at::kFloat), kv_heads,
                                                head_dim);
}

FeatureMaps TaylorShiftAttention::features(const at::Tensor& q, const at::Tensor& k) const {
  const int64_t D = head_dim();
  at::Tensor qh = unit_rows(q), kh = unit_rows(k);
  at::Tensor iu = at::triu_indices(D, D, 0, at::TensorOptions().dtype(at::kLong));
  at::Tensor r = iu[0], t = iu[1];
  at::Tensor mult = at::where(r == t, at::ones({1}, q.options()), 2 * at::ones({1}, q.options()));
  at::Tensor tau = tau_.to(q.scalar_type()).view({1, -1, 1, 1});
  at::Tensor q2 = qh.index_select(-1, r) * qh.index_select(-1, t) * mult;
  at::Tensor k2 = kh.index_select(-1, r) * kh.index_select(-1, t);
  FeatureMaps f;
  f.q = at::cat({at::ones_like(q.narrow(-1, 0, 1)), tau * qh, 0.5 * tau * tau * q2}, -1);
  f.k = at::cat({at::ones_like(k.narrow(-1, 0, 1)), kh, k2}, -1);
  return f;
}

at::Tensor TaylorShiftAttention::log_kernel(const at::Tensor& q, const at::Tensor& k,
                                            const std::vector<int64_t>& positions) const {
  const auto dt = feature_dtype(q.scalar_type());
  at::Tensor qh = unit_rows(q.to(dt));
  if (!positions.empty()) qh = qh.index_select(2, at::tensor(positions, at::kLong));
  at::Tensor kh = expand_kv_heads(unit_rows(k.to(dt)), q_heads());
  at::Tensor s = tau_.to(dt).view({1, -1, 1, 1}) * at::matmul(qh, kh.transpose(-1, -2));
  return at::log(1 + s + 0.5 * s * s);
}

TensorMap TaylorShiftAttention::state_dict() const { return {{"tau", tau_.detach().clone()}}; }

void TaylorShiftAttention::load_state_dict(const TensorMap& tensors) {
  at::Tensor t = take(tensors, "tau", {q_heads()}, names::taylorshift);
  at::NoGradGuard g;
  tau_.copy_(t);
}

}  // namespace oal::attn
