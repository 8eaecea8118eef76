#include "oal/attention/softmax/kv_storage.h"

#include <algorithm>
#include <vector>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"
#include "oal/io/gguf_quants.h"
#include "oal/simd/flash_softmax.h"

namespace oal::attn {
namespace {

constexpr std::string_view k_op = "softmax_kv_cache";

// New capacity for `need` tokens when `cap` are allocated (doubling, at least 16, and
// half again what a prompt needs: otherwise a 128-token prompt fills its cache exactly
// and the very next decode step copies it, one slow step in every conversation, the
// per-token p99 of a server), held as a Kᵀ row stride the flash kernel reads well
// (simd::kt_stride: never a multiple of 4 KiB, which would put a key block's D rows into
// the same L1 sets).
int64_t grown(int64_t cap, int64_t need) {
  return simd::kt_stride(std::max({need + need / 2, 2 * cap, int64_t{16}}));
}

// A copy of buf with its token axis `axis` holding `cap` tokens, the first `len` kept.
at::Tensor with_capacity(const at::Tensor& buf, int64_t axis, int64_t cap, int64_t len) {
  std::vector<int64_t> shape = buf.sizes().vec();
  shape[static_cast<size_t>(axis)] = cap;
  at::Tensor nb = at::empty(shape, buf.options());
  nb.narrow(axis, 0, len).copy_(buf.narrow(axis, 0, len));
  return nb;
}

// Room for t more tokens after the `len` held in a and b (token axes ax_a, ax_b).
void reserve(at::Tensor& a, int64_t ax_a, at::Tensor& b, int64_t ax_b, int64_t len, int64_t t) {
  if (len + t <= a.size(ax_a)) return;
  const int64_t cap = grown(a.size(ax_a), len + t);
  a = with_capacity(a, ax_a, cap, len);
  b = with_capacity(b, ax_b, cap, len);
}

// The fixed shape of a cache's tokens: B, Hkv, D, Dv (from its first tokens).
struct TokenShape {
  int64_t batch, kv_heads, dim, value_dim;

  static TokenShape of(const at::Tensor& k, const at::Tensor& v, int64_t batch) {
    check(k.size(0) == batch, k_op, "state was made for batch {}, got k {}", batch,
          shape_str(k));
    return {k.size(0), k.size(1), k.size(3), v.size(3)};
  }
  void check_tokens(const at::Tensor& k, const at::Tensor& v) const {
    check(k.size(0) == batch && k.size(1) == kv_heads && k.size(3) == dim &&
              v.size(3) == value_dim,
          k_op, "new tokens k {}, v {} do not match the cache (B={}, Hkv={}, D={}, Dv={})",
          shape_str(k), shape_str(v), batch, kv_heads, dim, value_dim);
  }
  simd::AttentionDims dims(const at::Tensor& q, int64_t len) const {
    check(q.size(1) % kv_heads == 0, k_op, "Hq = {} is not a multiple of Hkv = {}", q.size(1),
          kv_heads);
    simd::AttentionDims d;
    d.batch = q.size(0);
    d.q_heads = q.size(1);
    d.kv_heads = kv_heads;
    d.q_len = q.size(2);
    d.k_len = len;
    d.dim = q.size(3);
    d.value_dim = value_dim;
    return d;
  }
};

// K, V in the tokens' own dtype and device.
class TensorKv : public KvStorage {
 public:
  TensorKv(const at::Tensor& k, const at::Tensor& v, int64_t batch)
      : shape_(TokenShape::of(k, v, batch)),
        k_(at::empty({k.size(0), k.size(1), 0, k.size(3)}, k.options())),
        v_(at::empty({v.size(0), v.size(1), 0, v.size(3)}, v.options())) {}

  void append(const at::Tensor& k, const at::Tensor& v, int64_t len) override {
    shape_.check_tokens(k, v);
    check(k.scalar_type() == k_.scalar_type(), k_op, "dtype changed from {} to {}",
          c10::toString(k_.scalar_type()), c10::toString(k.scalar_type()));
    const int64_t t = k.size(2);
    reserve(k_, 2, v_, 2, len, t);
    k_.narrow(2, len, t).copy_(k);
    v_.narrow(2, len, t).copy_(v);
  }
  at::Tensor keys(int64_t len) const override { return k_.narrow(2, 0, len); }
  at::Tensor values(int64_t len) const override { return v_.narrow(2, 0, len); }
  int64_t bytes(int64_t len) const override {
    return len * shape_.batch * shape_.kv_heads * (shape_.dim + shape_.value_dim) *
           static_cast<int64_t>(k_.element_size());
  }

 private:
  TokenShape shape_;
  at::Tensor k_, v_;  // [B, Hkv, capacity, D|Dv]
};

// Kᵀ and V in fp32 or IEEE half, read in place by the flash kernels.
class KernelKv : public KvStorage {
 public:
  KernelKv(const at::Tensor& k, const at::Tensor& v, int64_t batch, bool half)
      : shape_(TokenShape::of(k, v, batch)) {
    const auto storage = at::TensorOptions().dtype(half ? at::kHalf : at::kFloat);
    kt_ = at::empty({k.size(0), k.size(1), k.size(3), 0}, storage);
    v_ = at::empty({v.size(0), v.size(1), 0, v.size(3)}, storage);
  }

  void append(const at::Tensor& k, const at::Tensor& v, int64_t len) override {
    shape_.check_tokens(k, v);
    const int64_t t = k.size(2);
    reserve(kt_, 3, v_, 2, len, t);
    kt_.narrow(3, len, t).copy_(k.transpose(2, 3));  // converts to the storage type
    v_.narrow(2, len, t).copy_(v);
  }
  at::Tensor keys(int64_t len) const override { return kt_.narrow(3, 0, len).transpose(2, 3); }
  at::Tensor values(int64_t len) const override { return v_.narrow(2, 0, len); }
  int64_t bytes(int64_t len) const override {
    return len * shape_.batch * shape_.kv_heads * (shape_.dim + shape_.value_dim) *
           static_cast<int64_t>(kt_.element_size());
  }
  bool kernel() const override { return true; }
  at::Tensor attend(const at::Tensor& q, int64_t len, float scale) const override {
    const simd::AttentionDims d = shape_.dims(q, len);
    at::Tensor y = at::empty({d.batch, d.q_heads, d.q_len, d.value_dim}, q.options());
    if (kt_.scalar_type() == at::kHalf)  // at::Half and the kernel's half: IEEE binary16
      simd::flash_softmax_kt_f16(
          d, q.data_ptr<float>(), reinterpret_cast<const uint16_t*>(kt_.data_ptr<at::Half>()),
          kt_.size(3), reinterpret_cast<const uint16_t*>(v_.data_ptr<at::Half>()), v_.size(2),
          y.data_ptr<float>(), scale);
    else
      simd::flash_softmax_kt_f32(d, q.data_ptr<float>(), kt_.data_ptr<float>(), kt_.size(3),
                                 v_.data_ptr<float>(), v_.size(2), y.data_ptr<float>(), scale);
    return y;
  }

 private:
  TokenShape shape_;
  at::Tensor kt_;  // [B, Hkv, D, capacity]
  at::Tensor v_;   // [B, Hkv, capacity, Dv]
};

constexpr auto k_q8 = static_cast<uint32_t>(io::GgmlType::Q8_0);

// Bytes of one Q8_0 row of `dim` values.
int64_t q8_row_bytes(int64_t dim) { return static_cast<int64_t>(io::ggml_nbytes(k_q8, dim)); }

// Key and value rows quantized to Q8_0 as they are appended.
class Q8Kv : public KvStorage {
 public:
  Q8Kv(const at::Tensor& k, const at::Tensor& v, int64_t batch)
      : shape_(TokenShape::of(k, v, batch)) {
    check(k.size(3) % 32 == 0 && v.size(3) % 32 == 0, k_op,
          "a q8_0 KV cache needs head dimensions that are multiples of 32, got D={}, Dv={}; "
          "use --kv-cache f16 or f32",
          k.size(3), v.size(3));
    const auto u8 = at::TensorOptions().dtype(at::kByte);
    k_ = at::empty({k.size(0), k.size(1), 0, q8_row_bytes(k.size(3))}, u8);
    v_ = at::empty({v.size(0), v.size(1), 0, q8_row_bytes(v.size(3))}, u8);
  }

  void append(const at::Tensor& k, const at::Tensor& v, int64_t len) override {
    shape_.check_tokens(k, v);
    reserve(k_, 2, v_, 2, len, k.size(2));
    quantize_rows_into(k.to(at::kFloat).contiguous(), k_, len);
    quantize_rows_into(v.to(at::kFloat).contiguous(), v_, len);
  }
  at::Tensor keys(int64_t len) const override { return decode_rows(k_, shape_.dim, len); }
  at::Tensor values(int64_t len) const override {
    return decode_rows(v_, shape_.value_dim, len);
  }
  int64_t bytes(int64_t len) const override {
    return len * shape_.batch * shape_.kv_heads * (k_.size(3) + v_.size(3));
  }
  bool kernel() const override { return true; }
  at::Tensor attend(const at::Tensor& q, int64_t len, float scale) const override {
    const simd::AttentionDims d = shape_.dims(q, len);
    at::Tensor y = at::empty({d.batch, d.q_heads, d.q_len, d.value_dim}, q.options());
    simd::flash_softmax_q8_0(d, q.data_ptr<float>(), k_.data_ptr<uint8_t>(), k_.size(2),
                             v_.data_ptr<uint8_t>(), v_.size(2), y.data_ptr<float>(), scale);
    return y;
  }

 private:
  // rows [B, H, t, dim] (fp32, contiguous) quantized into buf at token `at`.
  static void quantize_rows_into(const at::Tensor& rows, at::Tensor& buf, int64_t at) {
    const int64_t B = rows.size(0), H = rows.size(1), t = rows.size(2), dim = rows.size(3);
    const int64_t rb = buf.size(3), cap = buf.size(2);
    const float* src = rows.data_ptr<float>();
    uint8_t* dst = buf.data_ptr<uint8_t>();
    for (int64_t bh = 0; bh < B * H; ++bh)
      io::quantize(k_q8, src + bh * t * dim, t * dim, dst + (bh * cap + at) * rb);
  }
  // The first n rows of each head of buf, decoded to fp32 [B, H, n, dim].
  static at::Tensor decode_rows(const at::Tensor& buf, int64_t dim, int64_t n) {
    const int64_t B = buf.size(0), H = buf.size(1), cap = buf.size(2), rb = buf.size(3);
    at::Tensor out = at::empty({B, H, n, dim}, at::kFloat);
    for (int64_t bh = 0; bh < B * H; ++bh)
      io::dequantize(k_q8, buf.data_ptr<uint8_t>() + bh * cap * rb, n * dim,
                     out.data_ptr<float>() + bh * n * dim);
    return out;
  }

  TokenShape shape_;
  at::Tensor k_, v_;  // [B, Hkv, capacity, row bytes] uint8
};

}  // namespace

at::Tensor KvStorage::attend(const at::Tensor&, int64_t, float) const {
  fail(k_op, "attend() on a tensor-storage cache: the kernels cannot read it");
}

std::unique_ptr<KvStorage> make_kv_storage(KvCacheType type, bool kernel_ready,
                                           const at::Tensor& k, const at::Tensor& v,
                                           int64_t batch) {
  if (!kernel_ready) return std::make_unique<TensorKv>(k, v, batch);
  if (type == KvCacheType::q8_0) return std::make_unique<Q8Kv>(k, v, batch);
  return std::make_unique<KernelKv>(k, v, batch, type == KvCacheType::f16);
}

}  // namespace oal::attn
