#include "oal/attention/baselines/performer.h"

#include <cmath>

#include "oal/attention/baselines/random_draws.h"
#include "oal/core/error.h"

namespace oal::attn {

at::Tensor orthogonal_random_projection(int64_t features, int64_t dim, uint64_t seed) {
  check(features > 0 && dim > 0, names::performer, "features {} and dim {} must be > 0", features,
        dim);
  std::vector<at::Tensor> blocks;
  const int64_t n_blocks = (features + dim - 1) / dim;
  for (int64_t b = 0; b < n_blocks; ++b) {
    at::Tensor g = seeded_normal({dim, dim}, derive_seed(seed, {b, 1}));
    auto [q, r] = at::linalg_qr(g, "reduced");
    // Sign-fix the columns (diag(R) > 0) so that Q is Haar-distributed: LAPACK's raw Q
    // has sign patterns tied to G, which biases the directions and hence the estimator.
    q = q * at::sign(at::diagonal(r)).unsqueeze(0);
    blocks.push_back(q.t());  // rows orthonormal
  }
  at::Tensor W = at::cat(blocks, 0).narrow(0, 0, features);
  at::Tensor lengths =
      seeded_normal({features, dim}, derive_seed(seed, {n_blocks, 2})).norm(2, {1});
  return (W * lengths.unsqueeze(1)).contiguous();
}

PerformerAttention::PerformerAttention(at::Tensor projection, int64_t kv_heads, int64_t chunk)
    : FeatureMapMethod(projection.size(0), kv_heads, projection.size(2), chunk),
      projection_(projection.to(at::kDouble).contiguous()) {
  check(projection_.dim() == 3, names::performer, "projection must be [Hq, M, D]");
}

std::shared_ptr<PerformerAttention> PerformerAttention::init(int64_t q_heads, int64_t kv_heads,
                                                             int64_t head_dim, int64_t layer,
                                                             uint64_t seed, int64_t features) {
  std::vector<at::Tensor> per_head;
  for (int64_t h = 0; h < q_heads; ++h)
    per_head.push_back(orthogonal_random_projection(
        features, head_dim, derive_seed(seed, {layer, h, 0x9e7f})));
  return std::make_shared<PerformerAttention>(at::stack(per_head, 0), kv_heads);
}

at::Tensor PerformerAttention::log_features(const at::Tensor& x) const {
  const double scale = std::pow(double(head_dim()), -0.25);
  const double log_ratio = -0.5 * std::log(double(projection_.size(1)));
  at::Tensor xs = x.to(at::kDouble) * scale;
  at::Tensor proj = at::matmul(xs, projection_.transpose(-1, -2).unsqueeze(0));
  return proj - 0.5 * (xs * xs).sum(-1, true) + log_ratio;
}

FeatureMaps PerformerAttention::features(const at::Tensor& q, const at::Tensor& k) const {
  const double scale = std::pow(double(head_dim()), -0.25);
  const double ratio = 1.0 / std::sqrt(double(projection_.size(1)));
  at::Tensor Wt = projection_.transpose(-1, -2).unsqueeze(0);  // [1, Hq, D, M]
  at::Tensor qs = q.to(at::kDouble) * scale;
  at::Tensor ks = expand_kv_heads(k.to(at::kDouble), q_heads()) * scale;
  at::Tensor qd = at::matmul(qs, Wt), kd = at::matmul(ks, Wt);  // [B, Hq, T, M]
  at::Tensor q_diag = 0.5 * (qs * qs).sum(-1, true), k_diag = 0.5 * (ks * ks).sum(-1, true);
  FeatureMaps f;
  f.q = ratio * (at::exp(qd - q_diag - std::get<0>(qd.max(-1, true))) + k_performer_query_eps);
  // Key shift: max over tokens and features of w·k' per (batch, head), as upstream.
  at::Tensor c = kd.numel() ? kd.amax({2, 3}) : at::zeros({kd.size(0), kd.size(1)}, kd.options());
  f.k = ratio * at::exp(kd - k_diag - c.unsqueeze(-1).unsqueeze(-1));
  f.k_log_shift = c;
  return f;
}

TensorMap PerformerAttention::state_dict() const { return {{"projection", projection_.clone()}}; }

void PerformerAttention::load_state_dict(const TensorMap& tensors) {
  projection_ = take(tensors, "projection", projection_.sizes(), names::performer, at::kDouble);
}

}  // namespace oal::attn
