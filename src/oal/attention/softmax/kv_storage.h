#pragma once
// Where a SoftmaxKvCache keeps its keys and values (softmax_method.h): one storage per
// cache, chosen by its first tokens and its cache type, then kept.
//
//   kernel f32 / f16   Kᵀ [B, Hkv, D, capacity] and V [B, Hkv, capacity, Dv] in fp32 or
//                      IEEE half: the flash kernels read them in place
//   kernel q8_0        key and value rows [B, Hkv, capacity, D/32 · 34 bytes] (uint8),
//                      quantized per 32 values as they are appended
//   tensor             K, V [B, Hkv, capacity, D|Dv] in the tokens' dtype and device, for
//                      what the kernels cannot take (fp64, autograd, another device)
//
// Capacity doubles as tokens arrive (appending is amortised O(1) per token). Internal to
// src/oal/attention/softmax/.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>

#include "oal/attention/softmax/kv_cache_type.h"

namespace oal::attn {

class KvStorage {
 public:
  virtual ~KvStorage() = default;
  // Appends k [B, Hkv, t, D], v [B, Hkv, t, Dv] after the `len` tokens held. Throws
  // oal::Error("[softmax_kv_cache] ...") when B, Hkv, D, Dv (or the tensor storage's
  // dtype) differ from the first tokens'.
  virtual void append(const at::Tensor& k, const at::Tensor& v, int64_t len) = 0;
  // The first `len` keys [B, Hkv, len, D] and values [B, Hkv, len, Dv]: views in the
  // storage dtype, decoded fp32 copies for q8_0.
  virtual at::Tensor keys(int64_t len) const = 0;
  virtual at::Tensor values(int64_t len) const = 0;
  // Bytes of `len` tokens' keys and values as stored.
  virtual int64_t bytes(int64_t len) const = 0;
  // Whether the flash kernels read this storage in place (attend below).
  virtual bool kernel() const { return false; }
  // softmax(q Kᵀ · scale) V over the first `len` tokens, q [B, Hq, T, D] fp32 contiguous
  // (query i sees keys j <= len - T + i) -> [B, Hq, T, Dv] fp32. Kernel storages only.
  virtual at::Tensor attend(const at::Tensor& q, int64_t len, float scale) const;
};

// The storage for a cache of `type` whose first tokens are k, v (`batch` checked
// against them): a kernel storage when `kernel_ready` (the kernels can take these
// tokens), else tensor storage in their dtype.
std::unique_ptr<KvStorage> make_kv_storage(KvCacheType type, bool kernel_ready,
                                           const at::Tensor& k, const at::Tensor& v,
                                           int64_t batch);

}  // namespace oal::attn
