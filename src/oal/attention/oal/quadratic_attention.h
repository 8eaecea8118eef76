#pragma once
// OAL (and learned-global) attention of one layer as an AttentionMethod.
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/method.h"
#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/quadratic.h"

namespace oal::attn {

// forward(): hd_chunked over the layer's per-query-head kernels; new_state(): an
// HdDecodeState; both share one cached fp32 kernel plan (HdOptions::plan_cache).
// parameters(): {kernels().L} ([Hq, Gmax+1, Gmax+1]) when `trainable`, else empty.
// name(): "global" when every head has G = 1, else "oal".
// Inference is the default (trainable = false): forward() takes the CPU kernels. A
// trainable method records the graph through L under autograd (the ATen path); wrap its
// inference in a c10::NoGradGuard to take the kernels.
class QuadraticAttention : public AttentionMethod {
 public:
  explicit QuadraticAttention(LayerKernels kernels, HdOptions options = {},
                              bool trainable = false);
  // One kernel per query head; L kept in `dtype` (fp64 default, fp32 for training speed).
  static QuadraticAttention from_kernels(const std::vector<QuadraticKernel>& kernels,
                                         HdOptions options = {}, bool trainable = false,
                                         at::ScalarType dtype = at::kDouble);

  std::string name() const override;
  // q [B, Hq, T, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv] -> [B, Hq, T, Dv].
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v) const override;
  std::unique_ptr<DecodeState> new_state(int64_t batch) const override;
  std::vector<at::Tensor> parameters() const override;
  // name() and a hash of L and the grouping (fp64 values).
  std::string fingerprint() const override;
  // The chunked HD kernels unless the options ask for ATen (hd_method_blocker).
  PathChoice cpu_path() const override;

  const LayerKernels& kernels() const { return kernels_; }
  // The current kernels (detached copies of L), one per query head.
  std::vector<QuadraticKernel> to_kernels() const { return kernels_.to_kernels(); }
  const HdOptions& options() const { return options_; }

 private:
  LayerKernels kernels_;
  HdOptions options_;
};

}  // namespace oal::attn
