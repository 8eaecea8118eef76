#pragma once
// TaylorShift (paper App. F.1, adapted causally): q̂ = q / ||q||, k̂ = k / ||k||,
// s = tau_h q̂ᵀk̂ and
//
//   kappa(q, k) = 1 + s + s²/2 = ((1 + s)² + 1) / 2 > 0,
//
// normalised over the causal prefix (no output-amplitude scaling: output_normalized
// = False upstream). tau: one learnable temperature per query head, init 1.
// Features (exact, F = 1 + D + D(D+1)/2): phi_k = [1, k̂_r, k̂_r k̂_t (r <= t)] per KV head,
// phi_q = [1, tau q̂_r, tau²/2 · m_rt q̂_r q̂_t] (m_rt = 1 if r == t else 2).
// A zero vector is normalised as zero (its norm is clamped to 1e-30) so that it gives
// s = 0 instead of NaN.
#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/method_names.h"

namespace oal::attn {

class TaylorShiftAttention : public FeatureMapMethod {
 public:
  // tau [Hq] (fp32, may require grad; shared handle: the fitter updates it in place).
  TaylorShiftAttention(at::Tensor tau, int64_t kv_heads, int64_t head_dim, int64_t chunk = 64);
  // tau = 1 for every head.
  static std::shared_ptr<TaylorShiftAttention> init(int64_t q_heads, int64_t kv_heads,
                                                    int64_t head_dim);

  std::string name() const override { return names::taylorshift; }
  std::vector<at::Tensor> parameters() const override { return {tau_}; }
  FeatureMaps features(const at::Tensor& q, const at::Tensor& k) const override;
  // Closed form log(1 + s + s²/2), independent of the feature expansion.
  at::Tensor log_kernel(const at::Tensor& q, const at::Tensor& k,
                        const std::vector<int64_t>& positions = {}) const override;
  TensorMap state_dict() const override;  // "tau" [Hq] fp32
  void load_state_dict(const TensorMap& tensors) override;
  const at::Tensor& tau() const { return tau_; }

 private:
  at::Tensor tau_;
};

// Unit vectors along the last dim (norm clamped to 1e-30).
at::Tensor unit_rows(const at::Tensor& x);

}  // namespace oal::attn
