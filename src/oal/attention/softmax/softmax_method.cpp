#include "oal/attention/softmax/softmax_method.h"

#include <cmath>

#include "oal/attention/qkv_shape.h"
#include "oal/attention/simd_path.h"
#include "oal/attention/softmax/softmax.h"
#include "oal/attention/softmax/softmax_train.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {
namespace {

constexpr std::string_view k_cache_op = "softmax_kv_cache";

// The dispatch point: the flash-style CPU kernel whenever it can take the inputs (CPU,
// fp32/bf16, no autograd); under autograd on fp32 CPU whole sequences, the training
// kernel (O(N) memory, softmax_train.h); the differentiable tiled reference otherwise.
// All compute in fp32.
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t block,
                  std::optional<double> scale) {
  if (simd_blocker(q, k, v).empty()) return softmax_attention_flash(q, k, v, scale);
  if (softmax_train_ready(q, k, v))
    return softmax_attention_train(q, k, v, scale.value_or(1.0 / std::sqrt(double(q.size(-1)))));
  return softmax_attention_tiled(q, k, v, block, scale);
}

}  // namespace

SoftmaxKvCache::SoftmaxKvCache(int64_t batch, int64_t block, std::optional<double> scale,
                               KvCacheType type)
    : batch_(batch), block_(block), scale_(scale), type_(type) {
  check(batch >= 1, k_cache_op, "batch must be >= 1, got {}", batch);
}

void SoftmaxKvCache::append(const at::Tensor& k, const at::Tensor& v, bool fast) {
  if (!storage_) storage_ = make_kv_storage(type_, fast, k, v, batch_);
  storage_->append(k.detach(), v.detach(), len_);
  len_ += k.size(2);
}

at::Tensor SoftmaxKvCache::extend(const at::Tensor& q, const at::Tensor& k,
                                  const at::Tensor& v) {
  check_qkv(k_cache_op, q, k, v, /*allow_longer_keys=*/false);
  const bool fast = simd_blocker(q, k, v).empty();
  append(k, v, fast);
  if (simd_storage() && fast) {
    const double scale = scale_.value_or(1.0 / std::sqrt(static_cast<double>(q.size(3))));
    return storage_->attend(q.to(at::kFloat).contiguous(), len_, static_cast<float>(scale))
        .to(q.scalar_type());
  }
  if (simd_storage())  // kernel storage, but these queries need the reference
    return softmax_attention_tiled(q, keys().to(q.scalar_type()), values().to(q.scalar_type()),
                                  block_, scale_);
  return attend(q, keys(), values(), block_, scale_);
}

void SoftmaxKvCache::absorb(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  check_qkv(k_cache_op, q, k, v, /*allow_longer_keys=*/false);
  append(k, v, simd_blocker(q, k, v).empty());
}

at::Tensor SoftmaxKvCache::keys() const {
  return storage_ ? storage_->keys(len_) : at::Tensor();
}
at::Tensor SoftmaxKvCache::values() const {
  return storage_ ? storage_->values(len_) : at::Tensor();
}

StateSnapshot SoftmaxKvCache::snapshot() const {
  StateSnapshot s{.tokens = len_};
  if (len_ == 0) return s;
  s.add("k", keys());
  s.add("v", values());
  return s;
}

void SoftmaxKvCache::restore(const StateSnapshot& s) {
  check_restorable(k_cache_op, s, len_, {"k", "v"});
  if (s.tokens == 0) return;
  const at::Tensor& k = *s.find(k_cache_op, "k", 4);
  const at::Tensor& v = *s.find(k_cache_op, "v", 4);
  check(k.size(2) == s.tokens && v.size(2) == s.tokens &&
            k.sizes().slice(0, 2) == v.sizes().slice(0, 2),
        k_cache_op, "restore: k {} and v {} do not hold {} tokens of the same heads", shape_str(k),
        shape_str(v), s.tokens);
  check(k.scalar_type() == v.scalar_type(), k_cache_op, "restore: k is {}, v is {}",
        c10::toString(k.scalar_type()), c10::toString(v.scalar_type()));
  // The storage extend() would have chosen; an f16 snapshot of an f16 cache is its own
  // kernel storage (an f32 cache given fp16 tokens keeps tensor storage, as extend does).
  const bool half_cache = type_ == KvCacheType::f16 && k.scalar_type() == at::kHalf &&
                          k.device().is_cpu() && !records_grad(k);
  append(k, v, half_cache || simd_blocker(k, k, v).empty());
}

int64_t SoftmaxKvCache::state_bytes() const { return storage_ ? storage_->bytes(len_) : 0; }

SoftmaxAttention::SoftmaxAttention(int64_t block, std::optional<double> scale, KvCacheType kv_cache)
    : block_(block), scale_(scale), kv_cache_(kv_cache) {
  check(block >= 1, "softmax_attention", "block must be >= 1, got {}", block);
}

at::Tensor SoftmaxAttention::forward(const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v) const {
  return attend(q, k, v, block_, scale_);
}

std::unique_ptr<DecodeState> SoftmaxAttention::new_state(int64_t batch) const {
  return std::make_unique<SoftmaxKvCache>(batch, block_, scale_, kv_cache_);
}

PathChoice SoftmaxAttention::cpu_path() const {
  return path_choice("flash, KV cache " + std::string(kv_cache_type_name(kv_cache_)), "");
}

}  // namespace oal::attn
