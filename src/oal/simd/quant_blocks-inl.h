// Per-target block decoders of the ggml quantized types (Highway "-inl.h" convention, as
// simd_tiles-inl.h: included once per target from a foreach_target.h translation unit).
// Each decoder expands 32 weights of a block into fp32 vectors, bit for bit what the
// scalar io::dequantize gives; linear_quant.cpp streams and expands rows with them.
#if defined(OAL_SIMD_QUANT_BLOCKS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef OAL_SIMD_QUANT_BLOCKS_INL_H_
#undef OAL_SIMD_QUANT_BLOCKS_INL_H_
#else
#define OAL_SIMD_QUANT_BLOCKS_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "oal/simd/simd_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace oal::simd::HWY_NAMESPACE {

constexpr size_t k_qk = 32;  // elements per block of every fast type
// Vectors per block: 2 on AVX-512, 4 on AVX2, 8 on SSE4/NEON, 32 on the scalar target.
constexpr size_t k_nv = k_qk / hn::MaxLanes(DF());

using DI = hn::Rebind<int32_t, DF>;

// The fp16 at p (any alignment) as fp32, through the target's conversion (F16C on
// AVX2/AVX-512; Highway emulates it elsewhere). Exact, as io::fp16_to_fp32.
HWY_INLINE float half_at(const uint8_t* p) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh;
  hwy::float16_t h[1];
  std::memcpy(h, p, sizeof(h));
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(dh, h)));
}

// Nibbles of elements [e, e + L) of a 4-bit block: element j < 16 is the low nibble of
// qs[j], element j >= 16 the high nibble of qs[j - 16] (ggml's Q4 layout).
HWY_INLINE hn::Vec<DI> nibbles(const uint8_t* qs, size_t e) {
  const DI di;
  const hn::Rebind<uint8_t, DF> d8;
  const auto bytes = hn::PromoteTo(di, hn::LoadU(d8, qs + (e & 15)));
  return e < 16 ? hn::And(bytes, hn::Set(di, 15)) : hn::ShiftRight<4>(bytes);
}

// Each decoder writes 32 weights of a block — its 32-element group `sub` < subs — as
// k_nv vectors (lane order = element order). The 32-element types are one group per
// block; the K types' 256-element super-blocks are eight.
// Q8_0, 34 bytes: d fp16 | qs int8[32].   w = d·q.
struct DecodeQ8_0 {
  static constexpr int64_t bytes = 34;
  static constexpr int subs = 1;
  HWY_INLINE void operator()(const uint8_t* b, int, VF* w) const {
    const DF df;
    const DI di;
    const hn::Rebind<int8_t, DF> d8;
    const VF d = hn::Set(df, half_at(b));
    const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
    const size_t L = hn::Lanes(df);
    for (size_t i = 0; i < k_nv; ++i)
      w[i] = hn::Mul(d, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, qs + i * L))));
  }
};

// Q4_0, 18 bytes: d fp16 | qs[16].   w = d·(q − 8).
struct DecodeQ4_0 {
  static constexpr int64_t bytes = 18;
  static constexpr int subs = 1;
  HWY_INLINE void operator()(const uint8_t* b, int, VF* w) const {
    const DF df;
    const DI di;
    const VF d = hn::Set(df, half_at(b));
    const size_t L = hn::Lanes(df);
    for (size_t i = 0; i < k_nv; ++i)
      w[i] = hn::Mul(d, hn::ConvertTo(df, hn::Sub(nibbles(b + 2, i * L), hn::Set(di, 8))));
  }
};

// Q4_1, 20 bytes: d fp16 | m fp16 | qs[16].   w = d·q + m (one rounding: d·q is exact).
struct DecodeQ4_1 {
  static constexpr int64_t bytes = 20;
  static constexpr int subs = 1;
  HWY_INLINE void operator()(const uint8_t* b, int, VF* w) const {
    const DF df;
    const VF d = hn::Set(df, half_at(b)), m = hn::Set(df, half_at(b + 2));
    const size_t L = hn::Lanes(df);
    for (size_t i = 0; i < k_nv; ++i)
      w[i] = hn::MulAdd(hn::ConvertTo(df, nibbles(b + 4, i * L)), d, m);
  }
};

// The fifth bits of elements [e, e + L) of a Q5 block, bit j of the little-endian u32
// at p, as int32 lanes holding 0 or 16.
HWY_INLINE hn::Vec<DI> fifth_bits(const uint8_t* p, size_t e) {
  const hn::RebindToUnsigned<DI> du;
  uint32_t qh;
  std::memcpy(&qh, p, sizeof(qh));
  const auto bits = hn::And(hn::Set(du, qh) >> hn::Iota(du, uint32_t(e)), hn::Set(du, 1u));
  return hn::BitCast(DI(), hn::ShiftLeft<4>(bits));
}

// Q5_0, 22 bytes: d fp16 | qh u32 | qs[16].   w = d·(q − 16), q = nibble | fifth bit.
struct DecodeQ5_0 {
  static constexpr int64_t bytes = 22;
  static constexpr int subs = 1;
  HWY_INLINE void operator()(const uint8_t* b, int, VF* w) const {
    const DF df;
    const DI di;
    const VF d = hn::Set(df, half_at(b));
    const size_t L = hn::Lanes(df);
    for (size_t i = 0; i < k_nv; ++i) {
      const auto q = hn::Or(nibbles(b + 6, i * L), fifth_bits(b + 2, i * L));
      w[i] = hn::Mul(d, hn::ConvertTo(df, hn::Sub(q, hn::Set(di, 16))));
    }
  }
};

// Q5_1, 24 bytes: d fp16 | m fp16 | qh u32 | qs[16].   w = d·q + m (d·q exact).
struct DecodeQ5_1 {
  static constexpr int64_t bytes = 24;
  static constexpr int subs = 1;
  HWY_INLINE void operator()(const uint8_t* b, int, VF* w) const {
    const DF df;
    const VF d = hn::Set(df, half_at(b)), m = hn::Set(df, half_at(b + 2));
    const size_t L = hn::Lanes(df);
    for (size_t i = 0; i < k_nv; ++i) {
      const auto q = hn::Or(nibbles(b + 8, i * L), fifth_bits(b + 4, i * L));
      w[i] = hn::MulAdd(hn::ConvertTo(df, q), d, m);
    }
  }
};

// ---- K types: 256-element super-blocks, decoded 32 elements (one group) at a time ----
// Layouts as io/gguf_quants.cpp documents them (block_q4_k, block_q5_k, block_q6_k);
// every product below is exact in fp32 (fp16 scale × 6- or 8-bit sub-scale × quant
// fits 24 bits, except Q6_K's, rounded once as the scalar decoder rounds it), so the
// results are the scalar decoder's bit for bit.

// Bytes [e, e + L) of p as int32 lanes.
HWY_INLINE hn::Vec<DI> bytes_at(const uint8_t* p) {
  const hn::Rebind<uint8_t, DF> d8;
  return hn::PromoteTo(DI(), hn::LoadU(d8, p));
}

// Q4_K's and Q5_K's (scale, min) of group s from the 12 packed bytes at b (see
// unpack_k4_scales in io/gguf_quants.cpp).
HWY_INLINE void k4_scale_min(const uint8_t* b, int s, int& sc, int& m) {
  if (s < 4) {
    sc = b[s] & 63;
    m = b[s + 4] & 63;
  } else {
    sc = (b[s + 4] & 0xF) | ((b[s - 4] >> 6) << 4);
    m = (b[s + 4] >> 4) | ((b[s] >> 6) << 4);
  }
}

// Q4_K, 144 bytes: d | dmin | 12 scale bytes | qs[128]; group s is nibble s % 2 of
// qs[32·(s/2) + l]. Q5_K, 176 bytes: the same with qh[32] before qs, bit s of qh[l] the
// fifth bit of group s.   w = (d·sc)·q − dmin·m.
template <bool kFifthBit>
struct DecodeK4 {
  static constexpr int64_t bytes = kFifthBit ? 176 : 144;
  static constexpr int subs = 8;
  HWY_INLINE void operator()(const uint8_t* b, int s, VF* w) const {
    const DF df;
    const DI di;
    int sc, m;
    k4_scale_min(b + 4, s, sc, m);
    const VF dl = hn::Set(df, half_at(b) * float(sc)), ml = hn::Set(df, half_at(b + 2) * float(m));
    const uint8_t* q = b + (kFifthBit ? 48 : 16) + 32 * (s / 2);
    const size_t L = hn::Lanes(df);
    for (size_t i = 0; i < k_nv; ++i) {
      const auto v = bytes_at(q + i * L);
      auto qi = s % 2 == 0 ? hn::And(v, hn::Set(di, 15)) : hn::ShiftRight<4>(v);
      if constexpr (kFifthBit) {
        const auto high = hn::And(hn::ShiftRightSame(bytes_at(b + 16 + i * L), s), hn::Set(di, 1));
        qi = hn::Or(qi, hn::ShiftLeft<4>(high));
      }
      w[i] = hn::Sub(hn::Mul(dl, hn::ConvertTo(df, qi)), ml);
    }
  }
};
using DecodeQ4_K = DecodeK4<false>;
using DecodeQ5_K = DecodeK4<true>;

// Q6_K, 210 bytes: ql[128] | qh[64] | int8 scales[16] | d. Group s (elements 32s + l):
// low 4 bits nibble s/2 % 2 of ql[64·(s/4) + 32·(s % 2) + l], high 2 bits bits
// [2·(s % 4), +2) of qh[32·(s/4) + l]; 16-element sub-blocks, so a group has two scales.
// w = (d·scale)·(q − 32).
struct DecodeQ6_K {
  static constexpr int64_t bytes = 210;
  static constexpr int subs = 8;
  HWY_INLINE void operator()(const uint8_t* b, int s, VF* w) const {
    const DF df;
    const DI di;
    const int g = s / 4, k = s % 4;
    const uint8_t* lo = b + 64 * g + 32 * (k % 2);
    const uint8_t* hi = b + 128 + 32 * g;
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half_at(b + 208);
    const size_t L = hn::Lanes(df);  // <= 16 on every target: a vector never spans two scales
    for (size_t i = 0; i < k_nv; ++i) {
      const auto low =
          hn::And(hn::ShiftRightSame(bytes_at(lo + i * L), 4 * (k / 2)), hn::Set(di, 15));
      const auto high = hn::And(hn::ShiftRightSame(bytes_at(hi + i * L), 2 * k), hn::Set(di, 3));
      const auto q = hn::Sub(hn::Or(low, hn::ShiftLeft<4>(high)), hn::Set(di, 32));
      const float dl = d * float(scales[2 * s + (i * L) / 16]);
      w[i] = hn::Mul(hn::Set(df, dl), hn::ConvertTo(df, q));
    }
  }
};

// 32 IEEE half or bfloat16 values (64 bytes): weights held in the 16-bit type a
// safetensors file stores (`--weights stored|bf16`), widened exactly. Rows must be whole
// groups of 32 (linear_quant takes the scalar rows otherwise).
template <class T16>  // hwy::float16_t or hwy::bfloat16_t
struct Decode16 {
  static constexpr int64_t bytes = 64;
  static constexpr int subs = 1;
  HWY_INLINE void operator()(const uint8_t* b, int, VF* w) const {
    const DF df;
    const hn::Rebind<T16, DF> dh;
    const auto* h = reinterpret_cast<const T16*>(b);
    for (size_t i = 0; i < k_nv; ++i)
      w[i] = hn::PromoteTo(df, hn::LoadU(dh, h + i * hn::Lanes(df)));
  }
};
using DecodeF16 = Decode16<hwy::float16_t>;
using DecodeBF16 = Decode16<hwy::bfloat16_t>;

// 32 fp32 values (a row the scalar decoder has already expanded).
struct DecodeF32 {
  static constexpr int64_t bytes = k_qk * sizeof(float);
  static constexpr int subs = 1;
  HWY_INLINE void operator()(const uint8_t* b, int, VF* w) const {
    const DF df;
    const auto* f = reinterpret_cast<const float*>(b);
    for (size_t i = 0; i < k_nv; ++i) w[i] = hn::LoadU(df, f + i * hn::Lanes(df));
  }
};

}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggled include guard
