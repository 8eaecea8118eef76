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

namespace oal::attn {

// The element type of a SoftmaxKvCache's kernel storage: f32 (exact, the default), f16
// (IEEE half, llama.cpp's default cache type: half the memory and bandwidth per cached
// token; the cached keys and values carry the half rounding, 2^-11 relative) or q8_0
// (llama.cpp's q8_0 cache type: 8.5 bits per value, each token's key and value rows
// quantized per 32 values as they are appended, up to 1/254 of a block's largest value
// of rounding; head dimensions must be multiples of 32). The attention arithmetic stays
// fp32 in every case.
enum class KvCacheType { f32, f16, q8_0 };
// "f32" | "f16" | "q8_0"; anything else throws oal::Error naming the accepted values.
KvCacheType parse_kv_cache_type(std::string_view name);
std::string_view kv_cache_type_name(KvCacheType type);

// Growing KV cache (capacity doubles, so appending is amortised O(1) per token).
// extend(q, k, v) with T new tokens appends k, v and attends the T queries causally to
// all n + T keys (query i sees keys j <= n + i), computed as SoftmaxAttention::forward.
// The first extend fixes B, Hkv, D, Dv and the storage:
//   kernel storage (the CPU kernels can take the tokens: CPU, fp32/bf16, no autograd):
//     Kᵀ [B, Hkv, D, capacity] and V [B, Hkv, capacity, Dv] in fp32 or f16 (`type`), or
//     for q8_0 key and value rows [B, Hkv, capacity, D/32 · 34 bytes] (uint8), appended
//     in place;
//     each extend runs the flash kernel on them directly: per-token work besides the
//     attention itself is O(new tokens) (no copy or transpose of the cache).
//   tensor storage (anything else: fp64, autograd, another device): K, V in the input
//     dtype, attended by softmax_attention_tiled (differentiable).
// A kernel-storage cache given tokens the kernels cannot take (e.g. autograd switched
// on mid-way) answers through the reference from a copy of its cache.
// state_bytes() = bytes of the n cached tokens' keys and values in their storage dtype
// (the allocation is at most 2x that).
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
  bool simd_storage() const { return kt_.defined() || kq_.defined(); }
  // The cached keys [B, Hkv, n, D] and values [B, Hkv, n, Dv] (views; fp32 or f16 for
  // kernel storage, the input dtype otherwise; a decoded fp32 copy for q8_0).
  at::Tensor keys() const;
  at::Tensor values() const;

 private:
  void append_tensor(const at::Tensor& k, const at::Tensor& v);
  void append_simd(const at::Tensor& k, const at::Tensor& v);
  void append_q8_0(const at::Tensor& k, const at::Tensor& v);
  // Appends to the storage the first call chose (kernel storage when `fast`).
  void append(const at::Tensor& k, const at::Tensor& v, bool fast);
  at::Tensor attend_simd(const at::Tensor& q) const;
  int64_t batch_, block_;
  std::optional<double> scale_;
  KvCacheType type_;
  at::Tensor k_buf_, v_buf_;  // tensor storage: [B, Hkv, capacity, D|Dv]
  at::Tensor kt_, vk_;        // kernel storage: [B, Hkv, D, capacity], [B, Hkv, capacity, Dv]
  at::Tensor kq_, vq_;        // q8_0 kernel storage: [B, Hkv, capacity, row bytes] uint8
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

 private:
  int64_t block_;
  std::optional<double> scale_;
  KvCacheType kv_cache_;
};

}  // namespace oal::attn
