#pragma once
// Base class of the feature-map baselines (TaylorShift, Performer, DiJiang,
// SpectraFormer): a subclass only says how q and k become positive features; forward,
// decoding, outputs at sampled positions and the O(N²) reference come from here and
// from the shared evaluator in feature_linear.h.
//
// Shapes as in method.h: q [B, Hq, T, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv].
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/baselines/feature_linear.h"
#include "oal/attention/method.h"

namespace oal::attn {

// Features of T tokens: q [B, Hq, T, F]; k [B, Hf, T, F] with Hf == Hkv or Hq (see
// feature_linear.h); k_log_shift [B, Hf] (optional): every key feature was divided by
// exp(k_log_shift) for range (Performer), which normalisation cancels.
struct FeatureMaps {
  at::Tensor q, k, k_log_shift;
};

// Named parameter tensors of a method ("tau", "theta", "projection", ...), CPU, in the
// layout the method documents; what `oal calibrate` saves as safetensors.
using TensorMap = std::map<std::string, at::Tensor>;

class FeatureMapMethod : public AttentionMethod {
 public:
  FeatureMapMethod(int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t chunk);

  // Causal forward through feature_attention_chunked; output in the input dtype.
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v) const override;
  // A FeatureDecodeState (the method must outlive it).
  std::unique_ptr<DecodeState> new_state(int64_t batch) const override;
  // Outputs at sampled positions (strictly increasing, in [0, T)) -> [B, Hq, P, Dv] in
  // the feature dtype; differentiable (what the fitter trains on).
  at::Tensor forward_at(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const std::vector<int64_t>& positions,
                        AtPath path = AtPath::automatic) const;
  // Unnormalised log-kernel of query rows at `positions` (empty: all T) against all T
  // keys -> [B, Hq, P, T] in the feature dtype, exact up to an additive constant per
  // query row (which normalisation cancels); entries j > position are unspecified.
  // Default: log(phi_q · phi_k). Subclasses with a closed form override it.
  virtual at::Tensor log_kernel(const at::Tensor& q, const at::Tensor& k,
                                const std::vector<int64_t>& positions = {}) const;
  // O(N²) reference: log_kernel_attention(log_kernel(q, k), v), in the input dtype.
  at::Tensor forward_pairwise(const at::Tensor& q, const at::Tensor& k,
                              const at::Tensor& v) const;

  // Features of q [B, Hq, T, D] and k [B, Hkv, T, D] given at the same T positions,
  // already cast to feature_dtype(). Differentiable in parameters().
  virtual FeatureMaps features(const at::Tensor& q, const at::Tensor& k) const = 0;
  // fp64 for methods that compute features in fp64 whatever the input (Performer,
  // SpectraFormer); otherwise compute_dtype(input).
  virtual at::ScalarType feature_dtype(at::ScalarType input) const;

  // Parameters and fixed random draws, for saving; load_state_dict() replaces them
  // (same names and shapes, else oal::Error).
  virtual TensorMap state_dict() const = 0;
  virtual void load_state_dict(const TensorMap& tensors) = 0;
  // name() and a hash of state_dict() (its values as fp64).
  std::string fingerprint() const override;

  int64_t q_heads() const { return q_heads_; }
  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t chunk() const { return chunk_; }

 protected:
  // Validates a call's q, k, v against this method's heads and head dim.
  void check_inputs(std::string_view op, const at::Tensor& q, const at::Tensor& k,
                    const at::Tensor& v) const;
  // tensors[name] with the expected shape, as fp32 (or `dtype`), else oal::Error.
  static at::Tensor take(const TensorMap& tensors, const std::string& name,
                         at::IntArrayRef shape, std::string_view method,
                         at::ScalarType dtype = at::kFloat);

 private:
  int64_t q_heads_, kv_heads_, head_dim_, chunk_;
};

// Constant-size decode state of a FeatureMapMethod: the prefix S [B, Hf, F, Dv],
// z [B, Hf, F] (and Performer's key log-shift), in the feature dtype.
class FeatureDecodeState : public DecodeState {
 public:
  FeatureDecodeState(const FeatureMapMethod& method, int64_t batch);
  at::Tensor extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override;
  int64_t tokens() const override { return tokens_; }
  int64_t state_bytes() const override;
  // "S" [B, Hf, F, Dv], "z" [B, Hf, F] and, for Performer, "log_shift" [B, Hf] (none when
  // empty).
  StateSnapshot snapshot() const override;
  void restore(const StateSnapshot& snapshot) override;

 private:
  const FeatureMapMethod& method_;
  int64_t batch_;
  FeaturePrefix prefix_;
  int64_t tokens_ = 0;
};

}  // namespace oal::attn
