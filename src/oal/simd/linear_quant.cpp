// Projections on ggml-quantized weights, compiled once per SIMD target (Highway
// foreach_target): the streaming decode pass on the block decoders of
// quant_blocks-inl.h, its int8 route, and the row decoder the prefill panels use.
#include "oal/simd/simd_config.h"
// (simd_config.h first: it selects the targets foreach_target.h compiles.)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "oal/simd/linear_quant.cpp"
#include <hwy/foreach_target.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <cstring>
#include <vector>

#include "oal/io/gguf_quants.h"
#include "oal/simd/linear_quant.h"
#include "oal/simd/quant_blocks-inl.h"
#include "oal/simd/simd_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace oal::simd::HWY_NAMESPACE {

// How far ahead of the block being decoded the decode pass prefetches (rows are back to
// back, so this runs on into the next row).
constexpr int64_t k_prefetch_bytes = 2048;

// y[m, n] (row stride N) = row · x[m] for m < kM, `row` holding K elements in blocks. Each block
// is decoded once and multiplied with every x row; kA accumulators per x row keep
// enough FMAs in flight when kM is small (4 for one row on AVX2) without spilling.
template <int kM, class Decode>
HWY_INLINE void dot_row(const uint8_t* row, int64_t K, const float* x, float bias, float* y,
                        int64_t N) {
  constexpr size_t kA = std::max<size_t>(1, std::min<size_t>(k_nv, 8 / kM));
  const DF df;
  const size_t L = hn::Lanes(df);
  VF acc[kM][kA];
  for (int m = 0; m < kM; ++m)
    for (size_t a = 0; a < kA; ++a) acc[m][a] = hn::Zero(df);
  VF w[k_nv];
  for (int64_t b = 0; b < K / (int64_t(k_qk) * Decode::subs); ++b) {
    // Measured: without it the pass streams from DRAM at half of linear_f32's rate (the
    // decoding between loads leaves too few cache-line misses in flight).
    hwy::Prefetch(row + b * Decode::bytes + k_prefetch_bytes);
    for (int sub = 0; sub < Decode::subs; ++sub) {
      Decode()(row + b * Decode::bytes, sub, w);
      const float* xb = x + (b * Decode::subs + sub) * int64_t(k_qk);
      for (int m = 0; m < kM; ++m)
        for (size_t i = 0; i < k_nv; ++i)
          acc[m][i % kA] = hn::MulAdd(w[i], hn::LoadU(df, xb + m * K + i * L), acc[m][i % kA]);
    }
  }
  for (int m = 0; m < kM; ++m) {
    VF s = acc[m][0];
    for (size_t a = 1; a < kA; ++a) s = hn::Add(s, acc[m][a]);
    y[m * N] = hn::GetLane(hn::SumOfLanes(df, s)) + bias;
  }
}

template <int kM, class Decode>
void rows_fixed(const QuantMatrix& w, int64_t row_bytes, const float* x, const float* bias,
                float* y, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n)
    dot_row<kM, Decode>(w.data + n * row_bytes, w.cols, x, bias ? bias[n] : 0.0f, y + n, w.rows);
}

template <class Decode>
void rows_of(int64_t M, const QuantMatrix& w, int64_t row_bytes, const float* x,
             const float* bias, float* y, int64_t n0, int64_t n1) {
  switch (M) {
    case 1: return rows_fixed<1, Decode>(w, row_bytes, x, bias, y, n0, n1);
    case 2: return rows_fixed<2, Decode>(w, row_bytes, x, bias, y, n0, n1);
    case 3: return rows_fixed<3, Decode>(w, row_bytes, x, bias, y, n0, n1);
    case 4: return rows_fixed<4, Decode>(w, row_bytes, x, bias, y, n0, n1);
    case 5: return rows_fixed<5, Decode>(w, row_bytes, x, bias, y, n0, n1);
    case 6: return rows_fixed<6, Decode>(w, row_bytes, x, bias, y, n0, n1);
    case 7: return rows_fixed<7, Decode>(w, row_bytes, x, bias, y, n0, n1);
    default: return rows_fixed<8, Decode>(w, row_bytes, x, bias, y, n0, n1);
  }
}

// Rows [n0, n1) of y[M <= 8, w.rows] = x · wᵀ + bias. Types without a SIMD decoder are
// expanded one row at a time into `scratch` (w.cols floats) by io::dequantize.
void quant_rows(int64_t M, const QuantMatrix& w, int64_t row_bytes, const float* x,
                const float* bias, float* y, int64_t n0, int64_t n1, float* scratch) {
  switch (static_cast<io::GgmlType>(w.type)) {
    case io::GgmlType::Q8_0: return rows_of<DecodeQ8_0>(M, w, row_bytes, x, bias, y, n0, n1);
    case io::GgmlType::Q4_0: return rows_of<DecodeQ4_0>(M, w, row_bytes, x, bias, y, n0, n1);
    case io::GgmlType::Q4_1: return rows_of<DecodeQ4_1>(M, w, row_bytes, x, bias, y, n0, n1);
    case io::GgmlType::Q5_0: return rows_of<DecodeQ5_0>(M, w, row_bytes, x, bias, y, n0, n1);
    case io::GgmlType::Q5_1: return rows_of<DecodeQ5_1>(M, w, row_bytes, x, bias, y, n0, n1);
    case io::GgmlType::Q4_K: return rows_of<DecodeQ4_K>(M, w, row_bytes, x, bias, y, n0, n1);
    case io::GgmlType::Q5_K: return rows_of<DecodeQ5_K>(M, w, row_bytes, x, bias, y, n0, n1);
    case io::GgmlType::Q6_K: return rows_of<DecodeQ6_K>(M, w, row_bytes, x, bias, y, n0, n1);
    case io::GgmlType::F16: return rows_of<DecodeF16>(M, w, row_bytes, x, bias, y, n0, n1);
    case io::GgmlType::BF16: return rows_of<DecodeBF16>(M, w, row_bytes, x, bias, y, n0, n1);
    default: break;
  }
  const QuantMatrix one{w.type, w.rows, w.cols, reinterpret_cast<const uint8_t*>(scratch)};
  for (int64_t n = n0; n < n1; ++n) {
    io::dequantize(w.type, w.data + n * row_bytes, w.cols, scratch);
    // The expanded row is a one-row fp32 "matrix" at row n of `one`'s frame.
    rows_of<DecodeF32>(M, one, 0, x, bias, y, n, n + 1);
  }
}

// ---- The int8 route of the decode pass (QuantDot::int8) ----
// As llama.cpp multiplies these types: the activations quantized per 32-block to int8
// (x ≈ dx·qx, dx = max|x| / 127, rounded to nearest), an integer dot product per block,
// then one fp32 FMA per block with the two scales. The int8 values are held as int16 so
// the portable widening multiply-add (pmaddwd on x86, every Highway target has it) takes
// them; AVX-512 VNNI's int8 instructions are not reachable through Highway 1.0.
#if HWY_TARGET == HWY_SCALAR
using D16 = hn::Rebind<int16_t, DI>;  // one lane: the scalar target has no int16 pairs
#else
using D16 = hn::Repartition<int16_t, DI>;  // twice DI's lanes: pairs summed into int32
#endif
using V16 = hn::Vec<D16>;
constexpr size_t k_nv16 = k_qk / hn::MaxLanes(D16());  // int16 vectors per block

// Blocks of x[M, K] (rows back to back, K a multiple of 32): qx int16 in [-127, 127],
// dx per block and sx = Σ x per block (Q4_1's offset term needs it).
void quantize_activations(int64_t M, int64_t K, const float* x, int16_t* qx, float* dx,
                          float* sx) {
  const DF df;
  const hn::Rebind<int16_t, DF> dh;
  const size_t L = hn::Lanes(df);
  for (int64_t b = 0; b < M * K / int64_t(k_qk); ++b) {
    const float* xb = x + b * int64_t(k_qk);
    VF v[k_nv], amax = hn::Zero(df), sum = hn::Zero(df);
    for (size_t i = 0; i < k_nv; ++i) {
      v[i] = hn::LoadU(df, xb + i * L);
      amax = hn::Max(amax, hn::Abs(v[i]));
      sum = hn::Add(sum, v[i]);
    }
    const float a = hn::GetLane(hn::MaxOfLanes(df, amax));
    const VF inv = hn::Set(df, a > 0.0f ? 127.0f / a : 0.0f);
    for (size_t i = 0; i < k_nv; ++i)
      hn::StoreU(hn::DemoteTo(dh, hn::NearestInt(hn::Mul(v[i], inv))), dh,
                 qx + b * int64_t(k_qk) + i * L);
    dx[b] = a / 127.0f;
    sx[b] = hn::GetLane(hn::SumOfLanes(df, sum));
  }
}

// Quantized activations of a group of x rows: row m's block b at q + m·K + 32·b,
// its scale and sum at d[m·K/32 + b], s[m·K/32 + b].
struct QuantAct {
  const int16_t* q;
  const float* d;
  const float* s;
};

// Nibbles of elements [e, e + lanes) of a 4-bit block as int16 (ggml's Q4 layout, see
// nibbles above); a 32-lane vector holds the whole block: low nibbles, then high.
template <class D>
HWY_INLINE hn::Vec<D> nibbles16(D d16, const uint8_t* qs, size_t e) {
#if HWY_TARGET != HWY_SCALAR  // (no Combine there, and one lane never holds a block)
  if constexpr (hn::MaxLanes(D()) >= k_qk) {
    const hn::Half<D> dh;
    const hn::Rebind<uint8_t, decltype(dh)> d8;
    const auto bytes = hn::PromoteTo(dh, hn::LoadU(d8, qs));
    return hn::Combine(d16, hn::ShiftRight<4>(bytes), hn::And(bytes, hn::Set(dh, int16_t{15})));
  }
#endif
  const hn::Rebind<uint8_t, D> d8;
  const auto bytes = hn::PromoteTo(d16, hn::LoadU(d8, qs + (e & 15)));
  return e < 16 ? hn::And(bytes, hn::Set(d16, int16_t{15})) : hn::ShiftRight<4>(bytes);
}

// Integer decoders: a block's 32 quants as k_nv16 int16 vectors, w = d·q + m.
struct IntQ8_0 {
  static constexpr int64_t bytes = 34;
  static constexpr bool has_min = false;
  HWY_INLINE float operator()(const uint8_t* b, V16* q, float& m) const {
    const D16 d16;
    const hn::Rebind<int8_t, D16> d8;
    const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
    for (size_t i = 0; i < k_nv16; ++i)
      q[i] = hn::PromoteTo(d16, hn::LoadU(d8, qs + i * hn::Lanes(d16)));
    m = 0.0f;
    return half_at(b);
  }
};

struct IntQ4_0 {  // w = d·(q − 8)
  static constexpr int64_t bytes = 18;
  static constexpr bool has_min = false;
  HWY_INLINE float operator()(const uint8_t* b, V16* q, float& m) const {
    const D16 d16;
    for (size_t i = 0; i < k_nv16; ++i)
      q[i] = hn::Sub(nibbles16(d16, b + 2, i * hn::Lanes(d16)), hn::Set(d16, int16_t{8}));
    m = 0.0f;
    return half_at(b);
  }
};

struct IntQ4_1 {  // w = d·q + m
  static constexpr int64_t bytes = 20;
  static constexpr bool has_min = true;
  HWY_INLINE float operator()(const uint8_t* b, V16* q, float& m) const {
    const D16 d16;
    for (size_t i = 0; i < k_nv16; ++i) q[i] = nibbles16(d16, b + 4, i * hn::Lanes(d16));
    m = half_at(b + 2);
    return half_at(b);
  }
};

// y[m, n] (row stride N) = row · x[m] for m < kM through the quantized activations.
// Σ_e w_e x_e ≈ d·dx·Σ q·qx (+ m·Σ x for Q4_1). kA accumulators per row keep one FMA
// chain per block from limiting a single row.
template <int kM, class Decode>
HWY_INLINE void dot_row_int8(const uint8_t* row, int64_t K, const QuantAct& a, float bias,
                             float* y, int64_t N) {
  constexpr int kA = kM == 1 ? 4 : kM == 2 ? 2 : 1;
  const DF df;
  const DI di;
  const D16 d16;
  const size_t L16 = hn::Lanes(d16);
  const int64_t nb = K / int64_t(k_qk);
  VF acc[kM][kA];
  float off[kM] = {};
  for (int m = 0; m < kM; ++m)
    for (int j = 0; j < kA; ++j) acc[m][j] = hn::Zero(df);
  V16 q[k_nv16];
  for (int64_t b = 0; b < nb; ++b) {
    hwy::Prefetch(row + b * Decode::bytes + k_prefetch_bytes);  // as in dot_row
    float mw;
    const float dw = Decode()(row + b * Decode::bytes, q, mw);
    for (int m = 0; m < kM; ++m) {
      const int16_t* xq = a.q + m * K + b * int64_t(k_qk);
      auto s0 = hn::Zero(di), s1 = hn::Zero(di);
      for (size_t i = 0; i < k_nv16; ++i)
        s0 = hn::ReorderWidenMulAccumulate(di, q[i], hn::LoadU(d16, xq + i * L16), s0, s1);
      VF& c = acc[m][b % kA];
      c = hn::MulAdd(hn::Set(df, dw * a.d[m * nb + b]), hn::ConvertTo(df, hn::Add(s0, s1)), c);
      if constexpr (Decode::has_min) off[m] += mw * a.s[m * nb + b];
    }
  }
  for (int m = 0; m < kM; ++m) {
    VF s = acc[m][0];
    for (int j = 1; j < kA; ++j) s = hn::Add(s, acc[m][j]);
    y[m * N] = hn::GetLane(hn::SumOfLanes(df, s)) + off[m] + bias;
  }
}

template <int kM, class Decode>
void rows_fixed_int8(const QuantMatrix& w, int64_t row_bytes, const QuantAct& a,
                     const float* bias, float* y, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n)
    dot_row_int8<kM, Decode>(w.data + n * row_bytes, w.cols, a, bias ? bias[n] : 0.0f, y + n,
                             w.rows);
}

template <class Decode>
void rows_of_int8(int64_t M, const QuantMatrix& w, int64_t row_bytes, const QuantAct& a,
                  const float* bias, float* y, int64_t n0, int64_t n1) {
  switch (M) {
    case 1: return rows_fixed_int8<1, Decode>(w, row_bytes, a, bias, y, n0, n1);
    case 2: return rows_fixed_int8<2, Decode>(w, row_bytes, a, bias, y, n0, n1);
    case 3: return rows_fixed_int8<3, Decode>(w, row_bytes, a, bias, y, n0, n1);
    case 4: return rows_fixed_int8<4, Decode>(w, row_bytes, a, bias, y, n0, n1);
    case 5: return rows_fixed_int8<5, Decode>(w, row_bytes, a, bias, y, n0, n1);
    case 6: return rows_fixed_int8<6, Decode>(w, row_bytes, a, bias, y, n0, n1);
    case 7: return rows_fixed_int8<7, Decode>(w, row_bytes, a, bias, y, n0, n1);
    default: return rows_fixed_int8<8, Decode>(w, row_bytes, a, bias, y, n0, n1);
  }
}

// Rows [n0, n1) of y[M <= 8, w.rows] = x · wᵀ + bias on the int8 route (w of a type
// has_int8_path accepts; qx, dx, sx quantized from x: see QuantAct).
void quant_rows_int8(int64_t M, const QuantMatrix& w, int64_t row_bytes, const int16_t* qx,
                     const float* dx, const float* sx, const float* bias, float* y, int64_t n0,
                     int64_t n1) {
  const QuantAct a{qx, dx, sx};
  switch (static_cast<io::GgmlType>(w.type)) {
    case io::GgmlType::Q8_0: return rows_of_int8<IntQ8_0>(M, w, row_bytes, a, bias, y, n0, n1);
    case io::GgmlType::Q4_0: return rows_of_int8<IntQ4_0>(M, w, row_bytes, a, bias, y, n0, n1);
    case io::GgmlType::Q4_1: return rows_of_int8<IntQ4_1>(M, w, row_bytes, a, bias, y, n0, n1);
    default: return;  // callers check has_int8_path first
  }
}

template <class Decode>
void expand_rows(const QuantMatrix& w, int64_t row_bytes, int64_t r0, int64_t r1, float* out) {
  const DF df;
  const size_t L = hn::Lanes(df);
  VF v[k_nv];
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + r * row_bytes;
    float* o = out + (r - r0) * w.cols;
    for (int64_t b = 0; b < w.cols / (int64_t(k_qk) * Decode::subs); ++b)
      for (int sub = 0; sub < Decode::subs; ++sub) {
        Decode()(row + b * Decode::bytes, sub, v);
        float* og = o + (b * Decode::subs + sub) * int64_t(k_qk);
        for (size_t i = 0; i < k_nv; ++i) hn::StoreU(v[i], df, og + i * L);
      }
  }
}

// Rows [r0, r1) of w as fp32 into out[(r1 - r0), w.cols].
void decode_rows(const QuantMatrix& w, int64_t row_bytes, int64_t r0, int64_t r1, float* out) {
  switch (static_cast<io::GgmlType>(w.type)) {
    case io::GgmlType::Q8_0: return expand_rows<DecodeQ8_0>(w, row_bytes, r0, r1, out);
    case io::GgmlType::Q4_0: return expand_rows<DecodeQ4_0>(w, row_bytes, r0, r1, out);
    case io::GgmlType::Q4_1: return expand_rows<DecodeQ4_1>(w, row_bytes, r0, r1, out);
    case io::GgmlType::Q5_0: return expand_rows<DecodeQ5_0>(w, row_bytes, r0, r1, out);
    case io::GgmlType::Q5_1: return expand_rows<DecodeQ5_1>(w, row_bytes, r0, r1, out);
    case io::GgmlType::Q4_K: return expand_rows<DecodeQ4_K>(w, row_bytes, r0, r1, out);
    case io::GgmlType::Q5_K: return expand_rows<DecodeQ5_K>(w, row_bytes, r0, r1, out);
    case io::GgmlType::Q6_K: return expand_rows<DecodeQ6_K>(w, row_bytes, r0, r1, out);
    case io::GgmlType::F16: return expand_rows<DecodeF16>(w, row_bytes, r0, r1, out);
    case io::GgmlType::BF16: return expand_rows<DecodeBF16>(w, row_bytes, r0, r1, out);
    default: break;
  }
  for (int64_t r = r0; r < r1; ++r)
    io::dequantize(w.type, w.data + r * row_bytes, w.cols, out + (r - r0) * w.cols);
}

}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>

#include "oal/core/error.h"
#include "oal/simd/linear_f32.h"
#include "oal/simd/parallel.h"

namespace oal::simd {
HWY_EXPORT(quant_rows);
HWY_EXPORT(quant_rows_int8);
HWY_EXPORT(quantize_activations);
HWY_EXPORT(decode_rows);

namespace {

constexpr const char* k_op = "linear_quant";
constexpr int64_t k_decode_rows = 32;   // w rows per work item of the decode pass
// Up to this many x rows take the streaming pass (a server's batch of decode steps);
// above, the decoded panels and the fp32 GEMM (measured crossover, docs/quantized.md).
constexpr int64_t k_stream_max_rows = 32;
// Prefill panels: up to 4M decoded weights (16 MiB fp32), at least 256 rows.
constexpr int64_t k_panel_floats = int64_t{1} << 22;
constexpr int64_t k_panel_min_rows = 256;

// Bytes per row; checks the type and that cols fill whole blocks and whole groups of 32
// (the passes decode 32 weights at a time; every ggml block type is 32 or 256 wide).
int64_t checked_row_bytes(const QuantMatrix& w) {
  const auto info = io::ggml_type_info(w.type);
  check(info.has_value() && info->dequantizable, k_op, "weights of type {} cannot be decoded",
        io::ggml_type_name(w.type));
  const int64_t group = std::max<int64_t>(32, info->block_size);
  check(w.rows >= 1 && w.cols >= 1 && w.cols % group == 0, k_op,
        "{} weights [{}, {}]: expected positive sizes, columns a multiple of {}", info->name,
        w.rows, w.cols, group);
  check(w.data != nullptr, k_op, "{} weights: null data", info->name);
  return static_cast<int64_t>(io::ggml_nbytes(w.type, w.cols));
}

// Whole-block rows [r0, r1) decoded on up to `threads` workers.
void decode_panel(const QuantMatrix& w, int64_t row_bytes, int64_t r0, int64_t r1, float* out,
                  int threads) {
  constexpr int64_t step = 16;
  parallel_items((r1 - r0 + step - 1) / step, threads, [&](int64_t, int64_t i) {
    const int64_t a = r0 + i * step, b = std::min(r1, a + step);
    HWY_DYNAMIC_DISPATCH(decode_rows)(w, row_bytes, a, b, out + (a - r0) * w.cols);
  });
}

}  // namespace

namespace {

// The decode pass on the int8 route: x quantized once (all M rows), then the same work
// items as the dequantizing pass.
void stream_int8(int64_t M, const float* x, const QuantMatrix& w, int64_t row_bytes,
                 const float* bias, float* y, int threads) {
  const int64_t N = w.rows, K = w.cols, nb = M * K / 32;
  thread_local std::vector<int16_t> qx;
  thread_local std::vector<float> dx, sx;
  qx.resize(static_cast<size_t>(M * K));
  dx.resize(static_cast<size_t>(nb));
  sx.resize(static_cast<size_t>(nb));
  HWY_DYNAMIC_DISPATCH(quantize_activations)(M, K, x, qx.data(), dx.data(), sx.data());
  const int16_t* q = qx.data();
  const float *d = dx.data(), *s = sx.data();
  const int64_t items = (N + k_decode_rows - 1) / k_decode_rows;
  parallel_items(items, threads, [&](int64_t, int64_t i) {
    for (int64_t g = 0; g < M; g += 8)
      HWY_DYNAMIC_DISPATCH(quant_rows_int8)(std::min<int64_t>(8, M - g), w, row_bytes,
                                            q + g * K, d + g * K / 32, s + g * K / 32, bias,
                                            y + g * N, i * k_decode_rows,
                                            std::min(N, (i + 1) * k_decode_rows));
  });
}

}  // namespace

std::string_view quant_dot_name(QuantDot dot) {
  return dot == QuantDot::int8 ? "int8" : "dequant";
}

QuantDot parse_quant_dot(std::string_view name) {
  if (name == "dequant") return QuantDot::dequant;
  if (name == "int8") return QuantDot::int8;
  fail(k_op, "quant dot '{}': expected dequant or int8", name);
}

bool has_fast_quant_path(uint32_t type) {
  using io::GgmlType;
  return has_int8_path(type) || type == uint32_t(GgmlType::Q5_0) ||
         type == uint32_t(GgmlType::Q5_1) || type == uint32_t(GgmlType::Q4_K) ||
         type == uint32_t(GgmlType::Q5_K) || type == uint32_t(GgmlType::Q6_K) ||
         type == uint32_t(GgmlType::F16) || type == uint32_t(GgmlType::BF16);
}

bool has_int8_path(uint32_t type) {
  using io::GgmlType;
  return type == uint32_t(GgmlType::Q8_0) || type == uint32_t(GgmlType::Q4_0) ||
         type == uint32_t(GgmlType::Q4_1);
}

void dequantize_rows(const QuantMatrix& w, int64_t r0, int64_t r1, float* out) {
  const int64_t row_bytes = checked_row_bytes(w);
  check(0 <= r0 && r0 <= r1 && r1 <= w.rows, k_op, "rows [{}, {}) outside [0, {})", r0, r1,
        w.rows);
  if (r0 < r1) HWY_DYNAMIC_DISPATCH(decode_rows)(w, row_bytes, r0, r1, out);
}

void linear_quant(int64_t M, const float* x, const QuantMatrix& w, const float* bias, float* y,
                  QuantDot dot, int threads) {
  const int64_t row_bytes = checked_row_bytes(w);
  check(M >= 1, k_op, "expected at least one input row, got M={}", M);
  const int64_t N = w.rows, K = w.cols;
  if (M <= k_stream_max_rows && dot == QuantDot::int8 && has_int8_path(w.type))
    return stream_int8(M, x, w, row_bytes, bias, y, threads);
  if (M <= k_stream_max_rows) {
    const int64_t items = (N + k_decode_rows - 1) / k_decode_rows;
    std::vector<std::vector<float>> scratch(static_cast<size_t>(worker_count(items, threads)));
    parallel_items(items, threads, [&](int64_t worker, int64_t i) {
      std::vector<float>& s = scratch[static_cast<size_t>(worker)];
      s.resize(static_cast<size_t>(K));  // the scalar row fallback's row
      // Groups of up to 8 x rows (the register tile); a work item's w rows stay in L1/L2
      // from one group to the next, so w is still streamed from memory once.
      for (int64_t g = 0; g < M; g += 8)
        HWY_DYNAMIC_DISPATCH(quant_rows)(std::min<int64_t>(8, M - g), w, row_bytes, x + g * K,
                                         bias, y + g * N, i * k_decode_rows,
                                         std::min(N, (i + 1) * k_decode_rows), s.data());
    });
    return;
  }
  // Prefill: each panel of w rows is decoded once (in parallel) and multiplied with all M
  // rows of x by the packed fp32 GEMM. A panel is the whole matrix when it fits in
  // k_panel_floats (then y is written directly), else as many rows as fit, copied into y.
  int64_t P = std::min(N, std::max<int64_t>(k_panel_min_rows, k_panel_floats / K));
  if (P < N) P = std::min(P, std::max<int64_t>(k_panel_min_rows, k_panel_floats / M));
  // Kept between calls (they only grow): fresh pages for every projection of every layer
  // cost page faults comparable to the decoding itself.
  thread_local std::vector<float> panel, part;
  panel.resize(std::max(panel.size(), static_cast<size_t>(P * K)));
  if (P < N) part.resize(std::max(part.size(), static_cast<size_t>(M * P)));
  for (int64_t n0 = 0; n0 < N; n0 += P) {
    const int64_t pn = std::min(P, N - n0);
    decode_panel(w, row_bytes, n0, n0 + pn, panel.data(), threads);
    float* out = P < N ? part.data() : y;
    linear_f32(M, pn, K, x, panel.data(), bias != nullptr ? bias + n0 : nullptr, out, threads);
    if (P < N)
      for (int64_t m = 0; m < M; ++m) std::copy_n(part.data() + m * pn, pn, y + m * N + n0);
  }
}

}  // namespace oal::simd
#endif  // HWY_ONCE
