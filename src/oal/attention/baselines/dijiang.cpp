#include "oal/attention/baselines/dijiang.h"

#include <cmath>

#include "oal/attention/baselines/random_draws.h"
#include "oal/core/error.h"

namespace oal::attn {

at::Tensor dct_matrix(int64_t n) {
  at::Tensor C = at::empty({n, n}, at::kDouble);
  auto a = C.accessor<double, 2>();
  for (int64_t f = 0; f < n; ++f)
    for (int64_t i = 0; i < n; ++i)
      a[f][i] = std::sqrt((f == 0 ? 1.0 : 2.0) / double(n)) *
                std::cos(M_PI * (2.0 * i + 1.0) * f / (2.0 * n));
  return C;
}

DiJiangAttention::DiJiangAttention(at::Tensor projection, at::Tensor theta, int64_t kv_heads,
                                   int64_t chunk)
    : FeatureMapMethod(theta.size(0), kv_heads, projection.size(0), chunk),
      projection_(projection.to(at::kDouble).contiguous()),
      theta_(std::move(theta)) {
  check(projection_.dim() == 2 && projection_.size(0) == projection_.size(1), names::dijiang,
        "projection must be [D, D]");
  check(theta_.dim() == 2 && theta_.size(1) == projection_.size(1), names::dijiang,
        "theta must be [Hq, D] with D = {}", projection_.size(1));
}

std::shared_ptr<DiJiangAttention> DiJiangAttention::init(int64_t q_heads, int64_t kv_heads,
                                                         int64_t head_dim, int64_t layer,
                                                         uint64_t seed) {
  at::Tensor u = seeded_uniform({head_dim}, derive_seed(seed, {layer, 0xd1a}));
  at::Tensor w = std::sqrt(2.0) * at::erfinv(2 * u - 1);  // Phi^-1(u)
  at::Tensor P = at::matmul(dct_matrix(head_dim), at::diag(w));
  return std::make_shared<DiJiangAttention>(P, at::zeros({q_heads, head_dim}, at::kFloat),
                                            kv_heads);
}

FeatureMaps DiJiangAttention::features(const at::Tensor& q, const at::Tensor& k) const {
  const double scale = std::pow(double(head_dim()), -0.25);
  at::Tensor P = projection_.to(q.scalar_type());
  at::Tensor weight = at::exp(2 * theta_.to(q.scalar_type())).unsqueeze(0).unsqueeze(2);
  FeatureMaps f;
  f.q = weight * at::softmax(at::matmul(q * scale, P), -1);
  f.k = at::softmax(at::matmul(k * scale, P), -1);
  return f;
}

TensorMap DiJiangAttention::state_dict() const {
  return {{"projection", projection_.clone()}, {"theta", theta_.detach().clone()}};
}

void DiJiangAttention::load_state_dict(const TensorMap& tensors) {
  projection_ = take(tensors, "projection", projection_.sizes(), names::dijiang, at::kDouble);
  at::Tensor t = take(tensors, "theta", theta_.sizes(), names::dijiang);
  at::NoGradGuard g;
  theta_.copy_(t);
}

}  // namespace oal::attn
