#include "oal/attention/softmax_method.h"

#include "oal/attention/fast_paths.h"
#include "oal/attention/qkv_shape.h"
#include "oal/attention/softmax.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {
namespace {

// The flash-style CPU kernel whenever it can take the inputs (CPU, fp32/bf16, no
// autograd), the differentiable tiled reference otherwise. Both compute in fp32.
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t block,
                  std::optional<double> scale) {
  if (fast_kernel_blocker(q, k, v).empty()) return softmax_attention_fast(q, k, v, scale).y;
  return softmax_attention_tiled(q, k, v, block, scale);
}

}  // namespace

SoftmaxKvCache::SoftmaxKvCache(int64_t batch, int64_t block, std::optional<double> scale)
    : batch_(batch), block_(block), scale_(scale) {
  check(batch >= 1, "softmax_kv_cache", "batch must be >= 1, got {}", batch);
}

void SoftmaxKvCache::append(const at::Tensor& k, const at::Tensor& v) {
  constexpr std::string_view op = "softmax_kv_cache";
  int64_t t = k.size(2);
  if (!k_buf_.defined()) {
    check(k.size(0) == batch_, op, "state was made for batch {}, got k {}", batch_,
          shape_str(k));
    int64_t cap = std::max<int64_t>(t, 16);
    k_buf_ = at::empty({k.size(0), k.size(1), cap, k.size(3)}, k.options());
    v_buf_ = at::empty({v.size(0), v.size(1), cap, v.size(3)}, v.options());
  } else {
    check(k.size(0) == k_buf_.size(0) && k.size(1) == k_buf_.size(1) &&
              k.size(3) == k_buf_.size(3) && v.size(3) == v_buf_.size(3),
          op, "new tokens k {}, v {} do not match the cache [B, Hkv, *, D] {} / {}",
          shape_str(k), shape_str(v), shape_str(k_buf_), shape_str(v_buf_));
    check(k.scalar_type() == k_buf_.scalar_type(), op, "dtype changed from {} to {}",
          c10::toString(k_buf_.scalar_type()), c10::toString(k.scalar_type()));
  }
  if (len_ + t > k_buf_.size(2)) {
    int64_t cap = std::max(len_ + t, 2 * k_buf_.size(2));
    auto grow = [&](const at::Tensor& buf) {
      auto nb = at::empty({buf.size(0), buf.size(1), cap, buf.size(3)}, buf.options());
      nb.narrow(2, 0, len_).copy_(buf.narrow(2, 0, len_));
      return nb;
    };
    k_buf_ = grow(k_buf_);
    v_buf_ = grow(v_buf_);
  }
  k_buf_.narrow(2, len_, t).copy_(k);
  v_buf_.narrow(2, len_, t).copy_(v);
  len_ += t;
}

at::Tensor SoftmaxKvCache::extend(const at::Tensor& q, const at::Tensor& k,
                                  const at::Tensor& v) {
  check_qkv("softmax_kv_cache", q, k, v, /*allow_longer_keys=*/false);
  append(k.detach(), v.detach());
  return attend(q, keys(), values(), block_, scale_);
}

at::Tensor SoftmaxKvCache::keys() const {
  return k_buf_.defined() ? k_buf_.narrow(2, 0, len_) : at::Tensor();
}
at::Tensor SoftmaxKvCache::values() const {
  return v_buf_.defined() ? v_buf_.narrow(2, 0, len_) : at::Tensor();
}

int64_t SoftmaxKvCache::state_bytes() const {
  if (!k_buf_.defined()) return 0;
  int64_t per_token = k_buf_.size(0) * k_buf_.size(1) * (k_buf_.size(3) + v_buf_.size(3));
  return len_ * per_token * static_cast<int64_t>(k_buf_.element_size());
}

SoftmaxAttention::SoftmaxAttention(int64_t block, std::optional<double> scale)
    : block_(block), scale_(scale) {
  check(block >= 1, "softmax_attention", "block must be >= 1, got {}", block);
}

at::Tensor SoftmaxAttention::forward(const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v) const {
  return attend(q, k, v, block_, scale_);
}

std::unique_ptr<DecodeState> SoftmaxAttention::new_state(int64_t batch) const {
  return std::make_unique<SoftmaxKvCache>(batch, block_, scale_);
}

}  // namespace oal::attn
