#pragma once
// Exact softmax attention as an AttentionMethod (name "softmax"): the default attention
// of every transformer layer, and the reference the linearisations are measured against.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "oal/attention/method.h"

namespace oal::attn {

// Growing KV cache: keeps K [B, Hkv, n, D] and V [B, Hkv, n, Dv] of every absorbed token
// in the input dtype (capacity doubles, so appending is amortised O(1) per token).
// extend(q, k, v) with T new tokens appends k, v and attends the T queries causally to
// all n + T keys (query i sees keys j <= n + i), computed as SoftmaxAttention::forward. The first extend fixes B, Hkv, D, Dv
// and the dtype; later calls must match. state_bytes() = bytes of the n cached tokens'
// keys and values (the logical cache size; the allocation is at most 2x that).
class SoftmaxKvCache : public DecodeState {
 public:
  SoftmaxKvCache(int64_t batch, int64_t block, std::optional<double> scale);
  at::Tensor extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override;
  int64_t tokens() const override { return len_; }
  int64_t state_bytes() const override;
  // Views of the cached keys [B, Hkv, n, D] and values [B, Hkv, n, Dv].
  at::Tensor keys() const;
  at::Tensor values() const;

 private:
  void append(const at::Tensor& k, const at::Tensor& v);
  int64_t batch_, block_;
  std::optional<double> scale_;
  at::Tensor k_buf_, v_buf_;  // [B, Hkv, capacity, D|Dv]
  int64_t len_ = 0;
};

// forward() and the cache's extend(): the flash-style CPU kernel (fast_paths.h) when it
// can take the inputs (CPU, fp32/bf16, no autograd), else softmax_attention_tiled with
// `block` (default 128); new_state(): a SoftmaxKvCache. No trainable parameters.
class SoftmaxAttention : public AttentionMethod {
 public:
  explicit SoftmaxAttention(int64_t block = 128, std::optional<double> scale = std::nullopt);
  std::string name() const override { return "softmax"; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v) const override;
  std::unique_ptr<DecodeState> new_state(int64_t batch) const override;

 private:
  int64_t block_;
  std::optional<double> scale_;
};

}  // namespace oal::attn
