#pragma once
// Performer / FAVOR+ (paper App. F.1, adapted causally): positive orthogonal random
// features, M = 250 per query head, fixed per layer and query head (seeded).
//
// With q' = q D^(-1/4), k' = k D^(-1/4) and rows w_m of the projection W [Hq, M, D]:
//   phi_q(q)_m = M^(-1/2) (exp(w_m·q' - ||q'||²/2 - max_m' w_m'·q') + 1e-6)
//   phi_k(k)_m = M^(-1/2)  exp(w_m·k' - ||k'||²/2 - c)
// so that E_W[exp(w·q' - ||q'||²/2) exp(w·k' - ||k'||²/2)] = exp(qᵀk / sqrt(D)) (the
// softmax kernel). The query shift is per token (FAVOR+'s query stabiliser, which
// cancels); the key shift c is a max over tokens and features of w_m·k' per head. In a
// causal stream c can only be the running max, so the decode state rescales its prefix
// when c grows (exact, since c cancels). For that reason the keys carry no additive
// 1e-6 (upstream adds it to both; on keys it would make outputs depend on c, i.e. on
// future tokens). Features and prefix sums are fp64 whatever the input dtype.
//
// W: ceil(M / D) blocks, each the transpose of Q from the QR of a D x D standard normal
// matrix with columns sign-fixed so that diag(R) > 0 (Haar; upstream skips the fix,
// which biases the directions), the last block truncated; row m then scaled by the norm of
// an independent standard normal D-vector (chi(D) lengths, "scaling = 0" upstream).
// Key features depend on the query head (own W), so the state is per query head.
#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/method_names.h"

namespace oal::attn {

inline constexpr int64_t k_performer_features = 250;
inline constexpr double k_performer_query_eps = 1e-6;

class PerformerAttention : public FeatureMapMethod {
 public:
  // projection [Hq, M, D] fp64.
  PerformerAttention(at::Tensor projection, int64_t kv_heads, int64_t chunk = 64);
  // Draws W for every query head of `layer` from `seed` (independent per head).
  static std::shared_ptr<PerformerAttention> init(int64_t q_heads, int64_t kv_heads,
                                                  int64_t head_dim, int64_t layer,
                                                  uint64_t seed,
                                                  int64_t features = k_performer_features);

  std::string name() const override { return names::performer; }
  FeatureMaps features(const at::Tensor& q, const at::Tensor& k) const override;
  at::ScalarType feature_dtype(at::ScalarType) const override { return at::kDouble; }
  TensorMap state_dict() const override;  // "projection" [Hq, M, D] fp64
  void load_state_dict(const TensorMap& tensors) override;
  const at::Tensor& projection() const { return projection_; }

  // Unshifted log-features log(M^(-1/2)) + w_m·x' - ||x'||²/2 of x [B, Hq, T, D] (keys
  // already expanded to query heads) -> [B, Hq, T, M] fp64: their exp is the unbiased
  // FAVOR+ feature map (for tests of the estimator).
  at::Tensor log_features(const at::Tensor& x) const;

 private:
  at::Tensor projection_;
};

// One Performer projection [M, D] fp64 drawn from `seed` as described above.
at::Tensor orthogonal_random_projection(int64_t features, int64_t dim, uint64_t seed);

}  // namespace oal::attn
