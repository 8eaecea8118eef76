#pragma once
// DiJiang (paper App. F.1, adapted causally): a fixed projection P = C diag(w) per
// layer, C the orthonormal DCT-II matrix (C[f, n] = a_f cos(pi (2n+1) f / (2D)),
// a_0 = sqrt(1/D), a_f = sqrt(2/D)) and w_n = Phi^-1(u_n), u_n ~ U(0, 1) (inverse
// standard-normal samples; seeded). With x' = x D^(-1/4) the feature of a vector is
// softmax(x' P) over the D coordinates, weighted by exp(theta_h) on both sides:
//
//   kappa(q, k) = sum_f exp(2 theta_{h,f}) softmax(q' P)_f softmax(k' P)_f > 0,
//
// normalised over the causal prefix. theta [Hq, D]: learnable, init 0. The positional
// decay, GroupNorm and output gate of the released model are omitted (as the paper
// does). Both weights are folded into the query side, so key features (and the
// state) are per KV head. Computed in fp32 (fp64 for fp64 input).
#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/method_names.h"

namespace oal::attn {

class DiJiangAttention : public FeatureMapMethod {
 public:
  // projection [D, D] fp32/fp64 (fixed); theta [Hq, D] fp32 (may require grad).
  DiJiangAttention(at::Tensor projection, at::Tensor theta, int64_t kv_heads,
                   int64_t chunk = 64);
  // Draws the projection of `layer` from `seed`; theta = 0.
  static std::shared_ptr<DiJiangAttention> init(int64_t q_heads, int64_t kv_heads,
                                                int64_t head_dim, int64_t layer, uint64_t seed);

  std::string name() const override { return names::dijiang; }
  std::vector<at::Tensor> parameters() const override { return {theta_}; }
  FeatureMaps features(const at::Tensor& q, const at::Tensor& k) const override;
  TensorMap state_dict() const override;  // "projection" [D, D] fp64, "theta" [Hq, D] fp32
  void load_state_dict(const TensorMap& tensors) override;
  const at::Tensor& theta() const { return theta_; }
  const at::Tensor& projection() const { return projection_; }

 private:
  at::Tensor projection_, theta_;
};

// Orthonormal DCT-II matrix [n, n] fp64 (rows are frequencies).
at::Tensor dct_matrix(int64_t n);

}  // namespace oal::attn
