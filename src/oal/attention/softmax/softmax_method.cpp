#include "oal/attention/softmax/softmax_method.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "oal/attention/qkv_shape.h"
#include "oal/attention/simd_path.h"
#include "oal/attention/softmax/softmax.h"
#include "oal/attention/softmax/softmax_train.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"
#include "oal/io/gguf_quants.h"
#include "oal/simd/flash_softmax.h"

namespace oal::attn {
namespace {

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

KvCacheType parse_kv_cache_type(std::string_view name) {
  if (name == "f32") return KvCacheType::f32;
  if (name == "f16") return KvCacheType::f16;
  if (name == "q8_0") return KvCacheType::q8_0;
  fail("kv_cache_type", "unknown KV cache type '{}': expected f32, f16 or q8_0", name);
}

std::string_view kv_cache_type_name(KvCacheType type) {
  switch (type) {
    case KvCacheType::f16: return "f16";
    case KvCacheType::q8_0: return "q8_0";
    default: return "f32";
  }
}

SoftmaxKvCache::SoftmaxKvCache(int64_t batch, int64_t block, std::optional<double> scale,
                               KvCacheType type)
    : batch_(batch), block_(block), scale_(scale), type_(type) {
  check(batch >= 1, "softmax_kv_cache", "batch must be >= 1, got {}", batch);
}

namespace {

constexpr std::string_view k_cache_op = "softmax_kv_cache";

// New capacity for `need` tokens when `cap` are allocated (doubling, at least 16),
// held as a Kᵀ row stride the flash kernel reads well (simd::kt_stride: never a multiple
// of 4 KiB, which would put a key block's D rows into the same L1 sets).
int64_t grown(int64_t cap, int64_t need) {
  return simd::kt_stride(std::max({need, 2 * cap, int64_t{16}}));
}

// Checks new tokens against the cache's fixed B, Hkv, D, Dv.
void check_tokens(const at::Tensor& k, const at::Tensor& v, int64_t batch, int64_t kv_heads,
                  int64_t dim, int64_t value_dim) {
  check(k.size(0) == batch && k.size(1) == kv_heads && k.size(3) == dim &&
            v.size(3) == value_dim,
        k_cache_op, "new tokens k {}, v {} do not match the cache (B={}, Hkv={}, D={}, Dv={})",
        shape_str(k), shape_str(v), batch, kv_heads, dim, value_dim);
}

// A copy of buf with its token axis `axis` holding `cap` tokens, the first `len` kept.
at::Tensor with_capacity(const at::Tensor& buf, int64_t axis, int64_t cap, int64_t len) {
  std::vector<int64_t> shape = buf.sizes().vec();
  shape[static_cast<size_t>(axis)] = cap;
  at::Tensor nb = at::empty(shape, buf.options());
  nb.narrow(axis, 0, len).copy_(buf.narrow(axis, 0, len));
  return nb;
}

constexpr auto k_q8 = static_cast<uint32_t>(io::GgmlType::Q8_0);

// Bytes of one Q8_0 row of `dim` values, and the values of a q8_0 buffer's rows.
int64_t q8_row_bytes(int64_t dim) { return static_cast<int64_t>(io::ggml_nbytes(k_q8, dim)); }
int64_t q8_row_values(const at::Tensor& buf) {
  const auto info = *io::ggml_type_info(k_q8);
  return buf.size(3) / info.block_bytes * info.block_size;
}

// rows [B, H, t, dim] (fp32, contiguous) quantized into buf [B, H, capacity, row bytes]
// at token `at`.
void quantize_rows_into(const at::Tensor& rows, at::Tensor& buf, int64_t at) {
  const int64_t B = rows.size(0), H = rows.size(1), t = rows.size(2), dim = rows.size(3);
  const int64_t rb = q8_row_bytes(dim), cap = buf.size(2);
  const float* src = rows.data_ptr<float>();
  uint8_t* dst = buf.data_ptr<uint8_t>();
  for (int64_t bh = 0; bh < B * H; ++bh)
    io::quantize(k_q8, src + bh * t * dim, t * dim, dst + (bh * cap + at) * rb);
}

// The first n rows of each head of buf [B, H, capacity, row bytes] decoded to fp32
// [B, H, n, row values].
at::Tensor decode_rows(const at::Tensor& buf, int64_t n) {
  const int64_t dim = q8_row_values(buf);
  const int64_t B = buf.size(0), H = buf.size(1), cap = buf.size(2), rb = buf.size(3);
  at::Tensor out = at::empty({B, H, n, dim}, at::kFloat);
  for (int64_t bh = 0; bh < B * H; ++bh)
    io::dequantize(k_q8, buf.data_ptr<uint8_t>() + bh * cap * rb, n * dim,
                   out.data_ptr<float>() + bh * n * dim);
  return out;
}

}  // namespace

void SoftmaxKvCache::append_q8_0(const at::Tensor& k, const at::Tensor& v) {
  const int64_t t = k.size(2);
  if (!kq_.defined()) {
    check(k.size(0) == batch_, k_cache_op, "state was made for batch {}, got k {}", batch_,
          shape_str(k));
    check(k.size(3) % 32 == 0 && v.size(3) % 32 == 0, k_cache_op,
          "a q8_0 KV cache needs head dimensions that are multiples of 32, got D={}, Dv={}; "
          "use --kv-cache f16 or f32",
          k.size(3), v.size(3));
    const auto u8 = at::TensorOptions().dtype(at::kByte);
    kq_ = at::empty({k.size(0), k.size(1), 0, q8_row_bytes(k.size(3))}, u8);
    vq_ = at::empty({v.size(0), v.size(1), 0, q8_row_bytes(v.size(3))}, u8);
  }
  check_tokens(k, v, batch_, kq_.size(1), q8_row_values(kq_), q8_row_values(vq_));
  if (len_ + t > kq_.size(2)) {
    const int64_t cap = grown(kq_.size(2), len_ + t);
    kq_ = with_capacity(kq_, 2, cap, len_);
    vq_ = with_capacity(vq_, 2, cap, len_);
  }
  quantize_rows_into(k.to(at::kFloat).contiguous(), kq_, len_);
  quantize_rows_into(v.to(at::kFloat).contiguous(), vq_, len_);
  len_ += t;
}

void SoftmaxKvCache::append_tensor(const at::Tensor& k, const at::Tensor& v) {
  const int64_t t = k.size(2);
  if (!k_buf_.defined()) {
    check(k.size(0) == batch_, k_cache_op, "state was made for batch {}, got k {}", batch_,
          shape_str(k));
    k_buf_ = at::empty({k.size(0), k.size(1), 0, k.size(3)}, k.options());
    v_buf_ = at::empty({v.size(0), v.size(1), 0, v.size(3)}, v.options());
  }
  check_tokens(k, v, batch_, k_buf_.size(1), k_buf_.size(3), v_buf_.size(3));
  check(k.scalar_type() == k_buf_.scalar_type(), k_cache_op, "dtype changed from {} to {}",
        c10::toString(k_buf_.scalar_type()), c10::toString(k.scalar_type()));
  if (len_ + t > k_buf_.size(2)) {
    const int64_t cap = grown(k_buf_.size(2), len_ + t);
    k_buf_ = with_capacity(k_buf_, 2, cap, len_);
    v_buf_ = with_capacity(v_buf_, 2, cap, len_);
  }
  k_buf_.narrow(2, len_, t).copy_(k);
  v_buf_.narrow(2, len_, t).copy_(v);
  len_ += t;
}

void SoftmaxKvCache::append_simd(const at::Tensor& k, const at::Tensor& v) {
  if (type_ == KvCacheType::q8_0) return append_q8_0(k, v);
  const int64_t t = k.size(2);
  if (!kt_.defined()) {
    check(k.size(0) == batch_, k_cache_op, "state was made for batch {}, got k {}", batch_,
          shape_str(k));
    const auto storage =
        at::TensorOptions().dtype(type_ == KvCacheType::f16 ? at::kHalf : at::kFloat);
    kt_ = at::empty({k.size(0), k.size(1), k.size(3), 0}, storage);
    vk_ = at::empty({v.size(0), v.size(1), 0, v.size(3)}, storage);
  }
  check_tokens(k, v, batch_, kt_.size(1), kt_.size(2), vk_.size(3));
  if (len_ + t > kt_.size(3)) {
    const int64_t cap = grown(kt_.size(3), len_ + t);
    kt_ = with_capacity(kt_, 3, cap, len_);
    vk_ = with_capacity(vk_, 2, cap, len_);
  }
  kt_.narrow(3, len_, t).copy_(k.transpose(2, 3));  // converts to the storage type as it copies
  vk_.narrow(2, len_, t).copy_(v);
  len_ += t;
}

// The T queries against the whole kernel-storage cache, straight from its buffers.
at::Tensor SoftmaxKvCache::attend_simd(const at::Tensor& q) const {
  const at::Tensor qf = q.to(at::kFloat).contiguous();
  simd::AttentionDims d;
  d.batch = q.size(0);
  d.q_heads = q.size(1);
  d.kv_heads = kq_.defined() ? kq_.size(1) : kt_.size(1);
  d.q_len = q.size(2);
  d.k_len = len_;
  d.dim = q.size(3);
  d.value_dim = kq_.defined() ? q8_row_values(vq_) : vk_.size(3);
  check(d.q_heads % d.kv_heads == 0, k_cache_op, "Hq = {} is not a multiple of Hkv = {}",
        d.q_heads, d.kv_heads);
  at::Tensor y = at::empty({d.batch, d.q_heads, d.q_len, d.value_dim}, qf.options());
  const double scale = scale_.value_or(1.0 / std::sqrt(static_cast<double>(d.dim)));
  if (kq_.defined())
    simd::flash_softmax_q8_0(d, qf.data_ptr<float>(), kq_.data_ptr<uint8_t>(), kq_.size(2),
                             vq_.data_ptr<uint8_t>(), vq_.size(2), y.data_ptr<float>(),
                             static_cast<float>(scale));
  else if (kt_.scalar_type() == at::kHalf)  // at::Half and the kernel's half: IEEE binary16 bits
    simd::flash_softmax_kt_f16(
        d, qf.data_ptr<float>(), reinterpret_cast<const uint16_t*>(kt_.data_ptr<at::Half>()),
        kt_.size(3), reinterpret_cast<const uint16_t*>(vk_.data_ptr<at::Half>()), vk_.size(2),
        y.data_ptr<float>(), static_cast<float>(scale));
  else
    simd::flash_softmax_kt_f32(d, qf.data_ptr<float>(), kt_.data_ptr<float>(), kt_.size(3),
                               vk_.data_ptr<float>(), vk_.size(2), y.data_ptr<float>(),
                               static_cast<float>(scale));
  return y.to(q.scalar_type());
}

void SoftmaxKvCache::append(const at::Tensor& k, const at::Tensor& v, bool fast) {
  if (simd_storage() || (!k_buf_.defined() && fast))
    append_simd(k.detach(), v.detach());
  else
    append_tensor(k.detach(), v.detach());
}

at::Tensor SoftmaxKvCache::extend(const at::Tensor& q, const at::Tensor& k,
                                  const at::Tensor& v) {
  check_qkv(k_cache_op, q, k, v, /*allow_longer_keys=*/false);
  const bool fast = simd_blocker(q, k, v).empty();
  append(k, v, fast);
  if (simd_storage() && fast) return attend_simd(q);
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
  if (kq_.defined()) return decode_rows(kq_, len_);
  if (kt_.defined()) return kt_.narrow(3, 0, len_).transpose(2, 3);
  return k_buf_.defined() ? k_buf_.narrow(2, 0, len_) : at::Tensor();
}
at::Tensor SoftmaxKvCache::values() const {
  if (vq_.defined()) return decode_rows(vq_, len_);
  if (vk_.defined()) return vk_.narrow(2, 0, len_);
  return v_buf_.defined() ? v_buf_.narrow(2, 0, len_) : at::Tensor();
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
  check(k.size(2) == s.tokens && v.size(2) == s.tokens && k.sizes().slice(0, 2) == v.sizes().slice(0, 2),
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

int64_t SoftmaxKvCache::state_bytes() const {
  if (kq_.defined()) return len_ * kq_.size(0) * kq_.size(1) * (kq_.size(3) + vq_.size(3));
  const at::Tensor& kb = kt_.defined() ? kt_ : k_buf_;
  const at::Tensor& vb = kt_.defined() ? vk_ : v_buf_;
  if (!kb.defined()) return 0;
  const int64_t dim = kt_.defined() ? kt_.size(2) : k_buf_.size(3);
  const int64_t per_token = kb.size(0) * kb.size(1) * (dim + vb.size(3));
  return len_ * per_token * static_cast<int64_t>(kb.element_size());
}

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

}  // namespace oal::attn
