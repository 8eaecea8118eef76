#include "oal/io/gguf_quants.h"

#include <c10/util/Half.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "oal/core/error.h"

// Every output is computed in the order the gguf package uses ((d·sc)·q − dmin·m,
// d·q + m, ...). The products are exact in float32 (an fp16 scale has at most 11
// significant bits, a sub-block scale at most 7 and a quant at most 6: 24 together),
// so each output is rounded once, at its final sum, whether or not the compiler fuses
// it into an FMA; the result is bitwise the gguf package's.

namespace oal::io {

static_assert(std::endian::native == std::endian::little,
              "gguf_quants reads little-endian GGUF data in place");

namespace {

constexpr int64_t k_qk = 32;     // elements per block of the 32-element formats
constexpr int64_t k_qk_k = 256;  // elements per super-block of the K formats

struct TypeRow {
  uint32_t id;
  GgmlTypeInfo info;
};

// The gguf package's GGML_QUANT_SIZES (constants.py), plus MXFP4 (ggml.h).
constexpr TypeRow k_types[] = {
    {0, {"F32", 1, 4, true}},          {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", 32, 18, true}},       {3, {"Q4_1", 32, 20, true}},
    {6, {"Q5_0", 32, 22, true}},       {7, {"Q5_1", 32, 24, true}},
    {8, {"Q8_0", 32, 34, true}},       {9, {"Q8_1", 32, 40, false}},
    {10, {"Q2_K", 256, 84, true}},     {11, {"Q3_K", 256, 110, true}},
    {12, {"Q4_K", 256, 144, true}},    {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}},    {15, {"Q8_K", 256, 292, true}},
    {16, {"IQ2_XXS", 256, 66, false}}, {17, {"IQ2_XS", 256, 74, false}},
    {18, {"IQ3_XXS", 256, 98, false}}, {19, {"IQ1_S", 256, 50, false}},
    {20, {"IQ4_NL", 32, 18, false}},   {21, {"IQ3_S", 256, 110, false}},
    {22, {"IQ2_S", 256, 82, false}},   {23, {"IQ4_XS", 256, 136, false}},
    {24, {"I8", 1, 1, false}},         {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},        {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},        {29, {"IQ1_M", 256, 56, false}},
    {30, {"BF16", 1, 2, true}},        {34, {"TQ1_0", 256, 54, false}},
    {35, {"TQ2_0", 256, 66, false}},   {39, {"MXFP4", 32, 17, false}},
};

std::string supported_types() {
  std::string out;
  for (const auto& row : k_types) {
    if (!row.info.dequantizable) continue;
    if (!out.empty()) out += ", ";
    out += row.info.name;
  }
  return out;
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

float load_f16(const uint8_t* p) { return fp16_to_fp32(load_u16(p)); }

// ---- 32-element formats -------------------------------------------------------------
// In all of them element j < 16 is the low nibble of qs[j] and element j + 16 its high
// nibble; the 5-bit formats take element j's fifth bit from bit j of qh.

// 1 << j, from a table rather than a shift by j, so that the 5-bit loops vectorize
// without per-lane variable shifts (which SSE2 lacks).
constexpr auto k_bit = [] {
  std::array<uint32_t, 32> bits{};
  for (int j = 0; j < 32; ++j) bits[size_t(j)] = 1u << j;
  return bits;
}();

// 16 if bit j of qh is set, else 0.
inline int fifth_bit(uint32_t qh, int j) { return (qh & k_bit[size_t(j)]) != 0 ? 16 : 0; }

// Q4_0, 18 bytes: [0,2) d fp16 | [2,18) qs.   y = d·(q − 8), q in [0, 16).
void block_q4_0(const uint8_t* __restrict b, float* __restrict y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) y[j] = d * float(int(qs[j] & 0xF) - 8);
  for (int j = 0; j < 16; ++j) y[j + 16] = d * float(int(qs[j] >> 4) - 8);
}

// Q4_1, 20 bytes: [0,2) d fp16 | [2,4) m fp16 | [4,20) qs.   y = d·q + m.
void block_q4_1(const uint8_t* __restrict b, float* __restrict y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) y[j] = d * float(qs[j] & 0xF) + m;
  for (int j = 0; j < 16; ++j) y[j + 16] = d * float(qs[j] >> 4) + m;
}

// Q5_0, 22 bytes: [0,2) d fp16 | [2,6) qh u32 | [6,22) qs.   y = d·(q − 16), q in [0, 32).
void block_q5_0(const uint8_t* __restrict b, float* __restrict y) {
  const float d = load_f16(b);
  const uint32_t qh = load_u32(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int q = int(qs[j] & 0xF) | fifth_bit(qh, j);
    y[j] = d * float(q - 16);
  }
  for (int j = 0; j < 16; ++j) {
    const int q = int(qs[j] >> 4) | fifth_bit(qh, j + 16);
    y[j + 16] = d * float(q - 16);
  }
}

// Q5_1, 24 bytes: [0,2) d fp16 | [2,4) m fp16 | [4,8) qh u32 | [8,24) qs.   y = d·q + m.
void block_q5_1(const uint8_t* __restrict b, float* __restrict y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint32_t qh = load_u32(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int q = int(qs[j] & 0xF) | fifth_bit(qh, j);
    y[j] = d * float(q) + m;
  }
  for (int j = 0; j < 16; ++j) {
    const int q = int(qs[j] >> 4) | fifth_bit(qh, j + 16);
    y[j + 16] = d * float(q) + m;
  }
}

// Q8_0, 34 bytes: [0,2) d fp16 | [2,34) qs int8, element j = qs[j].   y = d·q.
void block_q8_0(const uint8_t* __restrict b, float* __restrict y) {
  const float d = load_f16(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * float(qs[j]);
}

// ---- K formats: 256-element super-blocks of 16 or 8 sub-blocks ------------------------

// Q8_K, 292 bytes: [0,4) d fp32 | [4,260) qs int8 | [260,292) bsums int16[16] (sums
// of 16 quants each, for dot products; unused here).   y = d·q.
void block_q8_k(const uint8_t* __restrict b, float* __restrict y) {
  float d;
  std::memcpy(&d, b, sizeof d);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 4);
  for (int j = 0; j < 256; ++j) y[j] = d * float(qs[j]);
}

// Q2_K, 84 bytes, 16 sub-blocks of 16 elements:
//   [0,16)  scales: byte s belongs to sub-block s; low nibble sc, high nibble m
//   [16,80) qs: 2-bit q of element 128h + 32k + l (h < 2, k < 4, l < 32) is bits
//           [2k, 2k+2) of qs[32h + l]
//   [80,82) d fp16 | [82,84) dmin fp16
//   y = (d·sc)·q − (dmin·m)
void block_q2_k(const uint8_t* __restrict b, float* __restrict y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = load_f16(b + 80);
  const float dmin = load_f16(b + 82);
  for (int s = 0; s < 16; ++s) {
    const uint8_t* q = qs + 32 * (s / 8) + 16 * (s % 2);
    const int shift = 2 * ((s / 2) % 4);
    const float dl = d * float(scales[s] & 0xF);
    const float ml = dmin * float(scales[s] >> 4);
    for (int l = 0; l < 16; ++l) y[16 * s + l] = dl * float((q[l] >> shift) & 3) - ml;
  }
}

// Q3_K's 16 6-bit scales, packed in 12 bytes: the low 4 bits of scale s are the low
// nibble of b[s] (s < 8) or the high nibble of b[s − 8]; its high 2 bits are bits
// [2(s/4), 2(s/4)+2) of b[8 + s%4]. Stored with an offset of 32.
void unpack_q3_k_scales(const uint8_t* b, int* sc) {
  for (int s = 0; s < 16; ++s) {
    const int lo = s < 8 ? (b[s] & 0xF) : (b[s - 8] >> 4);
    const int hi = (b[8 + s % 4] >> (2 * (s / 4))) & 3;
    sc[s] = (lo | (hi << 4)) - 32;
  }
}

// Q3_K, 110 bytes, 16 sub-blocks of 16 elements:
//   [0,32)    hmask: bit k of hmask[l] is the high bit of element 32k + l (k < 8)
//   [32,96)   qs: low 2 bits of element 128h + 32k + l in bits [2k, 2k+2) of qs[32h + l]
//   [96,108)  scales (unpack_q3_k_scales), signed
//   [108,110) d fp16
//   q = low − (high bit set ? 0 : 4), in [−4, 4);   y = (d·sc)·q
void block_q3_k(const uint8_t* __restrict b, float* __restrict y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  int sc[16];
  unpack_q3_k_scales(b + 96, sc);
  const float d = load_f16(b + 108);
  for (int e = 0; e < 256; e += 16) {
    const int h = e / 128, k = (e / 32) % 4, bit = e / 32;
    const uint8_t* q = qs + 32 * h + e % 32;
    const uint8_t* hm = hmask + e % 32;
    const float dl = d * float(sc[e / 16]);
    for (int l = 0; l < 16; ++l) {
      const int low = (q[l] >> (2 * k)) & 3;
      const int drop = (((hm[l] >> bit) & 1) ^ 1) << 2;
      y[e + l] = dl * float(low - drop);
    }
  }
}

// Q4_K's and Q5_K's 8 (scale, min) pairs of 6 bits, packed in 12 bytes b: for j < 4,
// sc = b[j] & 63 and m = b[j+4] & 63; for j >= 4, the low 4 bits are the nibbles of
// b[j+4] (sc low, m high) and the high 2 bits the top bits of b[j−4] (sc) and b[j] (m).
void unpack_k4_scales(const uint8_t* b, int* sc, int* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = b[j] & 63;
    m[j] = b[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = (b[j + 4] & 0xF) | ((b[j - 4] >> 6) << 4);
    m[j] = (b[j + 4] >> 4) | ((b[j] >> 6) << 4);
  }
}

// Q4_K, 144 bytes, 8 sub-blocks of 32 elements:
//   [0,2) d fp16 | [2,4) dmin fp16 | [4,16) scales (unpack_k4_scales)
//   [16,144) qs: element 64g + 32h + l (g < 4, h < 2, l < 32) is nibble h of qs[32g + l]
//   y = (d·sc)·q − (dmin·m), sub-block (e / 32)
void block_q4_k(const uint8_t* __restrict b, float* __restrict y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  int sc[8], m[8];
  unpack_k4_scales(b + 4, sc, m);
  const uint8_t* qs = b + 16;
  for (int s = 0; s < 8; ++s) {
    const uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    const float dl = d * float(sc[s]);
    const float ml = dmin * float(m[s]);
    for (int l = 0; l < 32; ++l) y[32 * s + l] = dl * float((q[l] >> shift) & 0xF) - ml;
  }
}

// Q5_K, 176 bytes, 8 sub-blocks of 32 elements:
//   [0,2) d fp16 | [2,4) dmin fp16 | [4,16) scales (unpack_k4_scales)
//   [16,48)  qh: bit s of qh[l] is the fifth bit of element 32s + l
//   [48,176) qs: low 4 bits as in Q4_K
//   y = (d·sc)·q − (dmin·m), q in [0, 32)
void block_q5_k(const uint8_t* __restrict b, float* __restrict y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  int sc[8], m[8];
  unpack_k4_scales(b + 4, sc, m);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int s = 0; s < 8; ++s) {
    const uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    const float dl = d * float(sc[s]);
    const float ml = dmin * float(m[s]);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 0xF) | (((qh[l] >> s) & 1) << 4);
      y[32 * s + l] = dl * float(v) - ml;
    }
  }
}

// Q6_K, 210 bytes, 16 sub-blocks of 16 elements:
//   [0,128)   ql: low 4 bits of element 128g + 64h + l (g, h < 2, l < 64) are nibble h
//             of ql[64g + l]
//   [128,192) qh: high 2 bits of element 128g + 32k + l (k < 4, l < 32) are bits
//             [2k, 2k+2) of qh[32g + l]
//   [192,208) scales int8, one per sub-block | [208,210) d fp16
//   y = (d·sc)·(q − 32), q in [0, 64)
void block_q6_k(const uint8_t* __restrict b, float* __restrict y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = load_f16(b + 208);
  for (int e = 0; e < 256; e += 16) {
    const int g = e / 128, k = (e / 32) % 4, l0 = e % 32;
    const uint8_t* lo = ql + 64 * g + 32 * (k % 2) + l0;
    const uint8_t* hi = qh + 32 * g + l0;
    const int lo_shift = 4 * (k / 2), hi_shift = 2 * k;
    const float dl = d * float(scales[e / 16]);
    for (int l = 0; l < 16; ++l) {
      const int v = ((lo[l] >> lo_shift) & 0xF) | (((hi[l] >> hi_shift) & 3) << 4);
      y[e + l] = dl * float(v - 32);
    }
  }
}

// ---- Plain types --------------------------------------------------------------------

void convert_f16(const uint8_t* __restrict src, int64_t n, float* __restrict dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
}

void convert_bf16(const uint8_t* __restrict src, int64_t n, float* __restrict dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
}

constexpr GgmlTypeInfo info_of(GgmlType type) {
  for (const auto& row : k_types)
    if (row.id == uint32_t(type)) return row.info;
  return {};
}

// Runs `Block` (which decodes `kSize` elements) over the consecutive blocks of a
// `kType` tensor; a template, so that the block function inlines into the loop.
template <void (*Block)(const uint8_t*, float*), GgmlType kType, int64_t kSize>
void run_blocks(const uint8_t* src, int64_t n, float* dst) {
  constexpr int64_t bytes = info_of(kType).block_bytes;
  static_assert(info_of(kType).block_size == kSize && bytes > 0);
  for (int64_t i = 0; i < n / kSize; ++i) Block(src + i * bytes, dst + i * kSize);
}

}  // namespace

float fp16_to_fp32(uint16_t h) {
  // fp16: sign 1 | exponent 5 (bias 15) | mantissa 10. Three candidates, selected by
  // masks rather than branches, so that convert_f16's loop vectorizes.
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  // Normal: the exponent rebiased to fp32's 127.
  const uint32_t normal = ((exp + (127 - 15)) << 23) | (man << 13);
  // Infinity and NaN (exponent 31): fp32's exponent 255, the NaN payload shifted along.
  const uint32_t inf_nan = 0x7F800000u | (man << 13);
  // Zero and subnormals: man · 2^-24, exact in fp32 (and normal there).
  const uint32_t small = std::bit_cast<uint32_t>(float(int32_t(man)) * 0x1p-24f);
  const uint32_t is_small = 0u - uint32_t(exp == 0);      // all ones or all zeros
  const uint32_t is_inf_nan = 0u - uint32_t(exp == 0x1F);
  const uint32_t big = (normal & ~is_inf_nan) | (inf_nan & is_inf_nan);
  return std::bit_cast<float>(sign | (big & ~is_small) | (small & is_small));
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  for (const auto& row : k_types)
    if (row.id == id) return row.info;
  return std::nullopt;
}

std::string ggml_type_name(uint32_t id) {
  if (auto info = ggml_type_info(id)) return std::string(info->name);
  return fmt::format("type {}", id);
}

uint64_t ggml_nbytes(uint32_t id, int64_t n) {
  const auto info = ggml_type_info(id);
  check(info.has_value(), "gguf", "unknown ggml tensor type id {}", id);
  check(n >= 0 && n % info->block_size == 0, "gguf",
        "{} tensor of {} elements: expected a non-negative multiple of the block size {}",
        info->name, n, info->block_size);
  const int64_t blocks = n / info->block_size;
  check(blocks <= std::numeric_limits<int64_t>::max() / info->block_bytes, "gguf",
        "{} tensor of {} elements: its size in bytes overflows int64", info->name, n);
  return uint64_t(blocks * info->block_bytes);
}

void dequantize(uint32_t id, const uint8_t* src, int64_t n, float* dst) {
  constexpr std::string_view op = "gguf dequantize";
  const auto info = ggml_type_info(id);
  check(info.has_value() && info->dequantizable, op,
        "cannot dequantize {}: expected one of {}", ggml_type_name(id), supported_types());
  check(n >= 0 && n % info->block_size == 0, op,
        "{}: {} elements, expected a non-negative multiple of the block size {}",
        info->name, n, info->block_size);
  if (n == 0) return;
  check(src != nullptr && dst != nullptr, op, "{}: null source or destination for {} elements",
        info->name, n);
  switch (static_cast<GgmlType>(id)) {
    case GgmlType::F32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
    case GgmlType::F16: convert_f16(src, n, dst); return;
    case GgmlType::BF16: convert_bf16(src, n, dst); return;
    case GgmlType::Q4_0: run_blocks<block_q4_0, GgmlType::Q4_0, k_qk>(src, n, dst); return;
    case GgmlType::Q4_1: run_blocks<block_q4_1, GgmlType::Q4_1, k_qk>(src, n, dst); return;
    case GgmlType::Q5_0: run_blocks<block_q5_0, GgmlType::Q5_0, k_qk>(src, n, dst); return;
    case GgmlType::Q5_1: run_blocks<block_q5_1, GgmlType::Q5_1, k_qk>(src, n, dst); return;
    case GgmlType::Q8_0: run_blocks<block_q8_0, GgmlType::Q8_0, k_qk>(src, n, dst); return;
    case GgmlType::Q2_K: run_blocks<block_q2_k, GgmlType::Q2_K, k_qk_k>(src, n, dst); return;
    case GgmlType::Q3_K: run_blocks<block_q3_k, GgmlType::Q3_K, k_qk_k>(src, n, dst); return;
    case GgmlType::Q4_K: run_blocks<block_q4_k, GgmlType::Q4_K, k_qk_k>(src, n, dst); return;
    case GgmlType::Q5_K: run_blocks<block_q5_k, GgmlType::Q5_K, k_qk_k>(src, n, dst); return;
    case GgmlType::Q6_K: run_blocks<block_q6_k, GgmlType::Q6_K, k_qk_k>(src, n, dst); return;
    case GgmlType::Q8_K: run_blocks<block_q8_k, GgmlType::Q8_K, k_qk_k>(src, n, dst); return;
    default: break;
  }
  fail(op, "{} is marked dequantizable but has no decoder", info->name);
}

void quantize(uint32_t id, const float* src, int64_t n, uint8_t* dst) {
  constexpr std::string_view op = "gguf quantize";
  check(id == uint32_t(GgmlType::Q8_0), op, "cannot quantize to {}: only Q8_0 is supported",
        ggml_type_name(id));
  check(n >= 0 && n % k_qk == 0, op, "Q8_0: {} elements, expected a non-negative multiple of {}",
        n, k_qk);
  if (n == 0) return;
  check(src != nullptr && dst != nullptr, op, "Q8_0: null source or destination");
  for (int64_t b = 0; b < n / k_qk; ++b) {
    const float* x = src + b * k_qk;
    uint8_t* out = dst + b * 34;
    float amax = 0.0f;
    for (int64_t j = 0; j < k_qk; ++j) {
      check(std::isfinite(x[j]), op, "Q8_0: element {} is {}, expected a finite value",
            b * k_qk + j, x[j]);
      amax = std::max(amax, std::fabs(x[j]));
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = c10::Half(d).x;
    out[0] = uint8_t(h & 0xFF);
    out[1] = uint8_t(h >> 8);
    for (int64_t j = 0; j < k_qk; ++j)
      out[2 + j] = uint8_t(int8_t(std::lround(x[j] * id)));
  }
}

}  // namespace oal::io
