#pragma once
// Exact softmax attention as an AttentionMethod (name "softmax"): the default attention
// of every transformer layer, and the reference the linearisations are measured against.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "oal/attention/method.h"
#include "oal/attention/method_names.h"
#include "oal/attention/softmax/kv_cache_type.h"
#include "oal/attention/softmax/kv_storage.h"

namespace oal::attn {

// Growing KV cache. extend(q, k, v) with T new tokens appends k, v and attends the T
// queries causally to all n + T keys (query i sees keys j <= n + i), computed as
// SoftmaxAttention::forward. The first tokens fix B, Hkv, D, Dv and the storage
// (kv_storage.h): kernel storage of the cache's `type` when the CPU kernels can take
// them (CPU, fp32/bf16, no autograd), whose extend runs the flash kernel on the buffers
// in place (per-token work besides the attention is O(new tokens)); tensor storage in
// the input dtype otherwise, attended by softmax_attention_tiled (differentiable). A
// kernel-storage cache given queries the kernels cannot take (autograd switched on
// mid-way) answers through the reference from a copy of its cache.
// state_bytes() = bytes of the n cached tokens as stored (the allocation is at most 2x).
class SoftmaxKvCache : public DecodeState {
 public:
  SoftmaxKvCache(int64_t batch, int64_t block, std::optional<double> scale,
                 KvCacheType type = KvCacheType::f32);
  at::Tensor extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override;
  // Appends k, v (q is only checked): the storage rule of extend, no attention.
  void absorb(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override;
  int64_t tokens() const override { return len_; }
  int64_t state_bytes() const override;
  // "k" [B, Hkv, n, D] and "v" [B, Hkv, n, Dv] in the storage dtype (none when empty;
  // fp32, decoded, for a q8_0 cache: quantizing them again gives the same blocks).
  StateSnapshot snapshot() const override;
  // Appends the snapshot's keys and values (kernel storage when they are fp32/bf16/f16).
  void restore(const StateSnapshot& snapshot) override;
  // Whether the cache holds kernel storage (false before the first extend).
  bool simd_storage() const { return storage_ && storage_->kernel(); }
  // The cached keys [B, Hkv, n, D] and values [B, Hkv, n, Dv] (views; fp32 or f16 for
  // kernel storage, the input dtype otherwise; a decoded fp32 copy for q8_0).
  at::Tensor keys() const;
  at::Tensor values() const;

 private:
  // Appends to the storage; the first call chooses it (kernel storage when `fast`).
  void append(const at::Tensor& k, const at::Tensor& v, bool fast);
  int64_t batch_, block_;
  std::optional<double> scale_;
  KvCacheType type_;
  std::unique_ptr<KvStorage> storage_;  // null before the first tokens
  int64_t len_ = 0;
};

// forward() and the cache's extend(): the flash-style CPU kernel (softmax.h) when it
// can take the inputs (CPU, fp32/bf16, no autograd), else softmax_attention_tiled with
// `block` (default 128); new_state(): a SoftmaxKvCache of `kv_cache` type. No trainable
// parameters.
class SoftmaxAttention : public AttentionMethod {
 public:
  static constexpr int64_t k_default_block = 128;
  explicit SoftmaxAttention(int64_t block = k_default_block,
                            std::optional<double> scale = std::nullopt,
                            KvCacheType kv_cache = KvCacheType::f32);
  std::string name() const override { return names::softmax; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v) const override;
  std::unique_ptr<DecodeState> new_state(int64_t batch) const override;
  KvCacheType kv_cache() const { return kv_cache_; }
  // Always the SIMD code for inference inputs: the flash kernel and its cache type.
  PathChoice cpu_path() const override;

 private:
  int64_t block_;
  std::optional<double> scale_;
  KvCacheType kv_cache_;
};

}  // namespace oal::attn
