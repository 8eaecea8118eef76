#pragma once
// SpectraFormer, OPRF–FastFoodL variant (paper App. F.1, adapted causally).
//
// Learnable FastFood projection per layer (shared by its query heads), D a power of 2:
//   V(u) = D^(-1/2) · S ∘ H( G ∘ (H(B ∘ u))[perm] ),  H the unnormalised Sylvester
//   Hadamard transform, perm a fixed permutation, B, G, S ∈ R^D trainable, initialised
//   as upstream's fixed branch: B_i = ±1, G_i ~ N(0, 1), S_i ~ chi(D) / ||G||.
// Features (65 for D = 64: the D projections and upstream's constant smoothing column):
//   x' = x D^(-1/4)                       (the attention wrapper's scaling)
//   z(x) = [V(x' D^(-1/4)), 1]            (FastFood's own sqrt(1/sqrt(D)) input scaling)
//   OPRF per token t and query head h, from that token's pair (q_t, k_t) (upstream's
//   statistic with a batch of one): F = ||q'_t + k'_t||², rho = 2D / (sqrt((2F + D)² +
//   8 F D) + 2F + D), A = (1 - 1/rho) / 8, beta = sqrt(1 - 4A);
//   logit_m(x) = A ||S∘G∘B||² + beta z_m(x) - ||x'||²
//   phi(x) = exp(logit - max_m logit) + 1e-4    (per-token row max, additive offset)
// and kappa(q, k) = phi(q) · phi(k), normalised over the causal prefix. A and the row
// max depend only on the current token, so the state is causal and constant-size (per
// query head, since A pairs each query head with its KV head). Features and sums fp64,
// parameters fp32.
#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/method_names.h"

namespace oal::attn {

inline constexpr double k_spectraformer_offset = 1e-4;

class SpectraFormerAttention : public FeatureMapMethod {
 public:
  // B, G, S [D] fp32 (may require grad); perm [D] int64, a permutation of 0..D-1.
  SpectraFormerAttention(at::Tensor B, at::Tensor G, at::Tensor S, at::Tensor perm,
                         int64_t q_heads, int64_t kv_heads, int64_t chunk = 64);
  // Upstream initialisation for `layer` from `seed`.
  static std::shared_ptr<SpectraFormerAttention> init(int64_t q_heads, int64_t kv_heads,
                                                      int64_t head_dim, int64_t layer,
                                                      uint64_t seed);

  std::string name() const override { return names::spectraformer; }
  std::vector<at::Tensor> parameters() const override { return {B_, G_, S_}; }
  FeatureMaps features(const at::Tensor& q, const at::Tensor& k) const override;
  at::ScalarType feature_dtype(at::ScalarType) const override { return at::kDouble; }
  // "B", "G", "S" [D] fp32, "perm" [D] int64.
  TensorMap state_dict() const override;
  void load_state_dict(const TensorMap& tensors) override;

  // V(u) of u [..., D] by the structured transform (differentiable), in u's dtype.
  at::Tensor fastfood(const at::Tensor& u) const;
  // The same map as a dense matrix W [D, D] fp64 (V(u) = W u), built from explicit
  // Hadamard and permutation matrices (for tests).
  at::Tensor fastfood_dense() const;

 private:
  at::Tensor B_, G_, S_, perm_;
};

// Unnormalised fast Walsh–Hadamard transform along the last dim (a power of 2), in
// Sylvester order: H_ij = (-1)^popcount(i & j). Differentiable.
at::Tensor hadamard_transform(const at::Tensor& x);
// The explicit Sylvester matrix [n, n] fp64.
at::Tensor hadamard_matrix(int64_t n);

}  // namespace oal::attn
