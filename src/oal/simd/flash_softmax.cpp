// Flash-style causal softmax on the CPU, compiled once per SIMD target (Highway
// foreach_target; the GEMMs go through gemm_f32's own dispatch).
#include "oal/simd/simd_config.h"
// (simd_config.h first: it selects the targets foreach_target.h compiles.)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "oal/simd/flash_softmax.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include <limits>
#include <vector>

#include "oal/core/error.h"
#include "oal/io/gguf_quants.h"
#include "oal/simd/flash_softmax.h"
#include "oal/simd/gemm_f32.h"
#include "oal/simd/linear_quant.h"
#include "oal/simd/parallel.h"
#include "oal/simd/simd_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace oal::simd::HWY_NAMESPACE {
namespace {

constexpr float k_neg_inf = -std::numeric_limits<float>::infinity();

// Online-softmax step for one score row s[0, n_total) of which the first n_valid are
// visible: updates the running max m and sum l, overwrites s with exp(s - m_new) (zeros
// past n_valid) and returns the factor the row's running output must be scaled by.
// Whole vectors run unmasked; only the one straddling n_valid is masked, and the masked
// keys past it (a causal diagonal's) are zeroed without an exp.
float online_row(float* s, int64_t n_valid, int64_t n_total, float& m, float& l) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  const VF neg_inf = hn::Set(d, k_neg_inf);
  VF vmax = neg_inf;
  int64_t j = 0;
  for (; j + L <= n_valid; j += L) vmax = hn::Max(vmax, hn::LoadU(d, s + j));
  if (j < n_valid)
    vmax = hn::Max(vmax, hn::IfThenElse(first_lanes(d, n_valid - j), load_n(d, s + j, n_valid - j),
                                        neg_inf));
  const float m_new = std::max(m, hn::GetLane(hn::MaxOfLanes(d, vmax)));
  const float alpha = m == k_neg_inf ? 0.0f : std::exp(m - m_new);
  const VF vm = hn::Set(d, m_new);
  VF vsum = hn::Zero(d);
  for (j = 0; j + L <= n_valid; j += L) {
    const VF p = exp_nonpositive(d, hn::Sub(hn::LoadU(d, s + j), vm));
    hn::StoreU(p, d, s + j);
    vsum = hn::Add(vsum, p);
  }
  if (j < n_valid) {
    const VF p = hn::IfThenElseZero(first_lanes(d, n_valid - j),
                                    exp_nonpositive(d, hn::Sub(load_n(d, s + j, n_valid - j), vm)));
    store_n(p, d, s + j, n_total - j);
    vsum = hn::Add(vsum, p);
    j += L;
  }
  for (; j < n_total; j += L) store_n(hn::Zero(d), d, s + j, n_total - j);
  l = l * alpha + hn::GetLane(hn::SumOfLanes(d, vsum));
  m = m_new;
  return alpha;
}

struct Scratch {
  std::vector<float> qs, s, o, m, l;
  // A half cache's key block as fp32: Kᵀ [D, k_block], V [k_block, Dv] (vb also a q8_0
  // block's values); a q8_0 block's key rows kr [k_block, D], the item's queries
  // transposed qt [D, rows] and the transposed scores st [k_block, rows] (see q8_block).
  std::vector<float> kb, vb, kr, qt, st;
};

// The cache element type a call reads: fp32 and f16 hold Kᵀ rows; q8_0 holds key rows
// (Q8_0 blocks of 32 along D, as each token was appended) and value rows likewise.
enum class Cache { f32 = 0, f16 = 1, q8_0 = 2 };

// Geometry of the work items: `heads` query heads of one KV group stacked over one
// query block of `rows` positions (rows = heads x positions; several heads are stacked
// only when T is shorter than the block, e.g. decode, so each GEMM still has rows).
struct Items {
  int64_t heads = 1, n_hb = 1, n_qb = 1, block = 64;
  int64_t count(const AttentionDims& d) const { return d.batch * d.kv_heads * n_hb * n_qb; }
};

Items plan_items(const AttentionDims& d, const FlashOptions& opt) {
  Items it;
  const FlashTiling t = flash_tiling(d, opt);
  it.block = t.block;
  it.heads = t.heads;
  it.n_hb = d.group_size() / it.heads;
  it.n_qb = (d.q_len + it.block - 1) / it.block;
  return it;
}

struct Call {
  const AttentionDims& dims;
  const FlashOptions& opt;
  const Items& it;
  const float* q;
  const void* kt;  // float Kᵀ, hwy::float16_t Kᵀ, or Q8_0 key rows (see Cache)
  int64_t ldkt;    // Kᵀ row stride, or (q8_0) key rows per KV head
  const void* v;
  int64_t v_rows;
  float* y;
  float scale;
  Cache cache;
};

// Keys [j0, j0 + bc) of KV head kvh of an fp32 or f16 cache as fp32 operands of the two
// GEMMs: Kᵀ rows with stride ldkt and V rows of Dv. An fp32 cache is read in place; an
// f16 one is widened into the worker's scratch first (one pass over the block, then
// GEMMs from cache).
struct KvBlock {
  const float* kt;
  int64_t ldkt;
  const float* v;
};

KvBlock kv_block(const Call& c, int64_t kvh, int64_t j0, int64_t bc, Scratch& w) {
  const int64_t D = c.dims.dim, Dv = c.dims.value_dim, Bc = c.opt.k_block;
  if (c.cache == Cache::f32) {
    const float* kt = static_cast<const float*>(c.kt) + kvh * D * c.ldkt;
    const float* v = static_cast<const float*>(c.v) + kvh * c.v_rows * Dv;
    return {kt + j0, c.ldkt, v + j0 * Dv};
  }
  // f16 (q8_0 blocks go through q8_block).
  const auto* kt = static_cast<const hwy::float16_t*>(c.kt) + kvh * D * c.ldkt + j0;
  const auto* v = static_cast<const hwy::float16_t*>(c.v) + (kvh * c.v_rows + j0) * Dv;
  for (int64_t r = 0; r < D; ++r) widen_f16(kt + r * c.ldkt, w.kb.data() + r * Bc, bc);
  widen_f16(v, w.vb.data(), bc * Dv);
  return {w.kb.data(), Bc, w.vb.data()};
}

// A q8_0 cache's keys [j0, j0 + bc) of KV head kvh against the item's rows: the key rows
// decoded (linear_quant's SIMD decoders) and multiplied as they are, Sᵀ = K · Qsᵀ with
// w.qt = Qsᵀ [D, rows], then Sᵀ [bc, rows] transposed into w.s [rows, Bc] — a bc x rows
// transpose instead of the bc x D one Kᵀ would need (7 against 64 columns in decode). The
// block's values are decoded into w.vb [bc, Dv].
void q8_block(const Call& c, int64_t kvh, int64_t j0, int64_t bc, int64_t rows, Scratch& w) {
  const int64_t D = c.dims.dim, Dv = c.dims.value_dim, Bc = c.opt.k_block;
  const auto q8 = static_cast<uint32_t>(io::GgmlType::Q8_0);
  const auto* kq = static_cast<const uint8_t*>(c.kt);
  const auto* vq = static_cast<const uint8_t*>(c.v);
  dequantize_rows({q8, c.ldkt, D, kq + kvh * c.ldkt * int64_t(io::ggml_nbytes(q8, D))}, j0,
                  j0 + bc, w.kr.data());
  gemm_f32(bc, rows, D, w.kr.data(), D, 1, w.qt.data(), rows, w.st.data(), rows, false);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < bc; ++j) w.s[r * Bc + j] = w.st[j * rows + r];
  dequantize_rows({q8, c.v_rows, Dv, vq + kvh * c.v_rows * int64_t(io::ggml_nbytes(q8, Dv))}, j0,
                  j0 + bc, w.vb.data());
}

// Up to this many rows per work item, an f16 cache goes straight into the GEMMs (see
// flash_item). Measured on AVX-512 (SmolLM2, 3 rows per KV head, and the 0.5B shape, 7):
// see docs/quantized.md, "The KV cache of the softmax layers".
constexpr int64_t k_half_gemm_rows = 16;

// An f16 cache's Kᵀ rows and V rows of KV head kvh, as IEEE half bits.
const uint16_t* half_kt(const Call& c, int64_t kvh) {
  return static_cast<const uint16_t*>(c.kt) + kvh * c.dims.dim * c.ldkt;
}
const uint16_t* half_v(const Call& c, int64_t kvh) {
  return static_cast<const uint16_t*>(c.v) + kvh * c.v_rows * c.dims.value_dim;
}

// One work item: KV head `kvh` (batch-major index), head block `hb`, query block `qb`.
void flash_item(const Call& c, int64_t kvh, int64_t hb, int64_t qb, Scratch& w) {
  const AttentionDims& dims = c.dims;
  const int64_t D = dims.dim, Dv = dims.value_dim, T = dims.q_len;
  const int64_t Bc = c.opt.k_block, off = dims.offset();
  const int64_t i0 = qb * c.it.block, rb = std::min(c.it.block, T - i0);
  const int64_t rows = rb * c.it.heads;
  const int64_t b = kvh / dims.kv_heads;
  const int64_t h0 = (kvh % dims.kv_heads) * dims.group_size() + hb * c.it.heads;
  // Row r = (head h0 + r / rb, position i0 + r % rb).
  for (int64_t r = 0; r < rows; ++r)
    scaled_product(c.scale, c.q + ((b * dims.q_heads + h0 + r / rb) * T + i0 + r % rb) * D,
                   nullptr, w.qs.data() + r * D, D);
  std::fill(w.o.begin(), w.o.begin() + rows * Dv, 0.0f);
  std::fill(w.m.begin(), w.m.begin() + rows, k_neg_inf);
  std::fill(w.l.begin(), w.l.begin() + rows, 0.0f);
  const int64_t kend = i0 + rb + off;  // keys [0, kend) are visible to some row
  // An f16 cache read by few rows (decode: one row per query head of the group) is read
  // by GEMMs that widen B as they load it; widening a block into scratch first would
  // write and read every element once more for a B that is used only once or twice.
  const bool widen_in_gemm = c.cache == Cache::f16 && rows <= k_half_gemm_rows;
  if (c.cache == Cache::q8_0)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t p = 0; p < D; ++p) w.qt[p * rows + r] = w.qs[r * D + p];
  for (int64_t j0 = 0; j0 < kend; j0 += Bc) {
    const int64_t bc = std::min(Bc, kend - j0);
    // Scores of every row against keys [j0, j0 + bc) into w.s, and the block's values
    // as an fp32 operand (null: an f16 cache's values, widened in the value GEMM).
    const float* vblock = nullptr;
    if (c.cache == Cache::q8_0) {
      q8_block(c, kvh, j0, bc, rows, w);
      vblock = w.vb.data();
    } else if (widen_in_gemm) {
      gemm_f32_half_b(rows, bc, D, w.qs.data(), D, 1, half_kt(c, kvh) + j0, c.ldkt, w.s.data(),
                      Bc, false);
    } else {
      const KvBlock kv = kv_block(c, kvh, j0, bc, w);
      gemm_f32(rows, bc, D, w.qs.data(), D, 1, kv.kt, kv.ldkt, w.s.data(), Bc, false);
      vblock = kv.v;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n_valid = std::clamp<int64_t>(i0 + r % rb + off - j0 + 1, 0, bc);
      const float alpha = online_row(w.s.data() + r * Bc, n_valid, bc, w.m[r], w.l[r]);
      if (alpha != 1.0f)
        scaled_product(alpha, w.o.data() + r * Dv, nullptr, w.o.data() + r * Dv, Dv);
    }
    if (vblock == nullptr)
      gemm_f32_half_b(rows, Dv, bc, w.s.data(), Bc, 1, half_v(c, kvh) + j0 * Dv, Dv, w.o.data(),
                      Dv, true);
    else
      gemm_f32(rows, Dv, bc, w.s.data(), Bc, 1, vblock, Dv, w.o.data(), Dv, true);
  }
  for (int64_t r = 0; r < rows; ++r)
    scaled_product(1.0f / w.l[r], w.o.data() + r * Dv, nullptr,
                   c.y + ((b * dims.q_heads + h0 + r / rb) * T + i0 + r % rb) * Dv, Dv);
}

}  // namespace

void softmax_exp(const float* x, float* y, int64_t n) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t i = 0; i < n; i += L)
    store_n(exp_nonpositive(d, load_n(d, x + i, n - i)), d, y + i, n - i);
}

// kt, v: as `cache_kind` (a Cache: 0 f32, 1 f16, 2 q8_0; an int because the dispatch
// below is outside this per-target namespace) says (see Call).
void flash_kt(const AttentionDims& dims, const float* q, const void* kt, int64_t ldkt,
              const void* v, int64_t v_rows, float* y, float scale, const FlashOptions& opt,
              int cache_kind) {
  const auto cache = static_cast<Cache>(cache_kind);
  const Items it = plan_items(dims, opt);
  const int64_t items = it.count(dims);
  const int64_t rows = it.block * it.heads;
  std::vector<Scratch> scratch(static_cast<size_t>(worker_count(items, opt.threads)));
  for (auto& w : scratch) {
    w.qs.resize(rows * dims.dim);
    w.s.resize(rows * opt.k_block);
    w.o.resize(rows * dims.value_dim);
    w.m.resize(rows);
    w.l.resize(rows);
    if (cache != Cache::f32) {
      w.kb.resize(dims.dim * opt.k_block);
      w.vb.resize(opt.k_block * dims.value_dim);
    }
    if (cache == Cache::q8_0) {
      w.kr.resize(opt.k_block * dims.dim);
      w.qt.resize(dims.dim * rows);
      w.st.resize(opt.k_block * rows);
    }
  }
  const Call call{dims, opt, it, q, kt, ldkt, v, v_rows, y, scale, cache};
  const int64_t per_qb = dims.batch * dims.kv_heads * it.n_hb;
  // Item i: the latest query blocks (most keys) first, so the last items are cheap.
  parallel_items(items, opt.threads, [&](int64_t worker, int64_t i) {
    const int64_t qb = it.n_qb - 1 - i / per_qb, rest = i % per_qb;
    flash_item(call, rest / it.n_hb, rest % it.n_hb, qb, scratch[worker]);
  });
}

}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace oal::simd {
HWY_EXPORT(flash_kt);
HWY_EXPORT(softmax_exp);

void softmax_exp_f32(const float* x, float* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(softmax_exp)(x, y, n);
}

FlashTiling flash_tiling(const AttentionDims& d, const FlashOptions& opt) {
  FlashTiling t;
  t.block = std::min(opt.q_block, d.q_len);
  t.heads = std::clamp<int64_t>(opt.q_block / std::max<int64_t>(d.q_len, 1), 1, d.group_size());
  while (d.group_size() % t.heads != 0) --t.heads;
  return t;
}

void flash_softmax_kt_f32(const AttentionDims& dims, const float* q, const float* kt,
                          int64_t ldkt, const float* v, int64_t v_rows, float* y,
                          float scale, const FlashOptions& opt) {
  if (dims.q_len == 0 || dims.batch == 0 || dims.q_heads == 0) return;
  HWY_DYNAMIC_DISPATCH(flash_kt)(dims, q, kt, ldkt, v, v_rows, y, scale, opt, 0);
}

void flash_softmax_kt_f16(const AttentionDims& dims, const float* q, const uint16_t* kt,
                          int64_t ldkt, const uint16_t* v, int64_t v_rows, float* y, float scale,
                          const FlashOptions& opt) {
  static_assert(sizeof(hwy::float16_t) == sizeof(uint16_t), "IEEE half is 2 bytes");
  if (dims.q_len == 0 || dims.batch == 0 || dims.q_heads == 0) return;
  HWY_DYNAMIC_DISPATCH(flash_kt)(dims, q, kt, ldkt, v, v_rows, y, scale, opt, 1);
}

void flash_softmax_q8_0(const AttentionDims& dims, const float* q, const uint8_t* k_rows,
                        int64_t k_cap, const uint8_t* v_rows, int64_t v_cap, float* y,
                        float scale, const FlashOptions& opt) {
  check(dims.dim % 32 == 0 && dims.value_dim % 32 == 0, "flash_softmax",
        "a q8_0 cache needs head dimensions that are multiples of 32, got D={}, Dv={}",
        dims.dim, dims.value_dim);
  if (dims.q_len == 0 || dims.batch == 0 || dims.q_heads == 0) return;
  HWY_DYNAMIC_DISPATCH(flash_kt)(dims, q, k_rows, k_cap, v_rows, v_cap, y, scale, opt, 2);
}

void flash_softmax_f32(const AttentionDims& dims, const float* q, const float* k,
                       const float* v, float* y, float scale, const FlashOptions& opt) {
  const int64_t D = dims.dim, S = dims.k_len;
  if (dims.q_len == 0 || dims.batch == 0 || dims.q_heads == 0) return;
  const int64_t n_kv = dims.batch * dims.kv_heads;
  // Kᵀ per KV head [D, ld]: the score GEMM then reads contiguous key rows per dimension.
  const int64_t ld = kt_stride(S);
  std::vector<float> kt(static_cast<size_t>(n_kv * D * ld));
  parallel_items(n_kv, opt.threads, [&](int64_t, int64_t u) {
    const float* src = k + u * S * D;
    float* dst = kt.data() + u * D * ld;
    for (int64_t j = 0; j < S; ++j)
      for (int64_t r = 0; r < D; ++r) dst[r * ld + j] = src[j * D + r];
  });
  flash_softmax_kt_f32(dims, q, kt.data(), ld, v, S, y, scale, opt);
}

}  // namespace oal::simd
#endif  // HWY_ONCE
