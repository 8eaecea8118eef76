// Per-target helpers shared by the CPU kernels (Highway "-inl.h" convention: included
// once per target from inside a foreach_target.h translation unit, hence the toggled
// include guard instead of #pragma once).
#if defined(OAL_KERNELS_CPU_SIMD_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef OAL_KERNELS_CPU_SIMD_TILES_INL_H_
#undef OAL_KERNELS_CPU_SIMD_TILES_INL_H_
#else
#define OAL_KERNELS_CPU_SIMD_TILES_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace oal::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Vector registers of the target: register tiles are sized so accumulators, loaded
// operands and a broadcast fit without spilling (x86 before AVX-512 has 16, AVX-512
// and aarch64 have 32).
#if HWY_ARCH_X86 && HWY_TARGET != HWY_AVX3 && HWY_TARGET != HWY_AVX3_DL
inline constexpr int k_vector_registers = 16;
#else
inline constexpr int k_vector_registers = 32;
#endif

// Lanes [0, n) of a vector (n clamped to the vector length).
HWY_INLINE auto first_lanes(DF d, int64_t n) {
  return hn::FirstN(d, static_cast<size_t>(std::clamp<int64_t>(n, 0, hn::Lanes(d))));
}

// Lanes [0, n) of p, zeros above; n >= lanes loads a full vector. Memory past p[n - 1]
// is never read: Highway's MaskedLoad reads the whole vector on SSE4/NEON/scalar, so
// those targets go through a stack copy (a tail happens once per row, not per lane).
HWY_INLINE VF load_n(DF d, const float* p, int64_t n) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  if (n >= L) return hn::LoadU(d, p);
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX2 || HWY_TARGET <= HWY_AVX3)
  return hn::MaskedLoad(first_lanes(d, n), d, p);  // vmaskmov / AVX-512 masks: fault-free
#else
  HWY_ALIGN float buf[hn::MaxLanes(DF())] = {};
  std::copy(p, p + std::max<int64_t>(n, 0), buf);
  return hn::Load(d, buf);
#endif
}

// Stores lanes [0, n) of v to p; memory past p[n - 1] is never written (other threads
// may own it), which Highway's BlendedStore does not promise on every target.
HWY_INLINE void store_n(VF v, DF d, float* p, int64_t n) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  if (n >= L) return hn::StoreU(v, d, p);
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX2 || HWY_TARGET <= HWY_AVX3)
  hn::BlendedStore(v, first_lanes(d, n), d, p);
#else
  HWY_ALIGN float buf[hn::MaxLanes(DF())];
  hn::Store(v, d, buf);
  std::copy(buf, buf + std::max<int64_t>(n, 0), p);
#endif
}

// exp(x) for x <= 0, as the online softmax needs it (scores minus their running max).
// x is clamped to [-86, 0]: below -86 the result is exp(-86) ~ 4e-38, which a softmax
// sum of at least 1 cannot see, and callers zero masked lanes themselves.
// x = n ln2 + r with |r| <= ln2/2 (ln 2 split so the reduction is exact, with or without
// FMA), e^r by a degree-6 polynomial (interpolation error 2.6e-9; coefficients from
// scripts/fit_exp_poly.py), and 2^n added into the exponent bits (n >= -125 keeps the
// result normal). About 14 instructions where Highway's general Exp (any x, overflow)
// takes twice that, and the flash kernel runs one per score. Measured error (tests/simd/
// test_softmax_exp.cpp): at most 0.97 ulp with FMA, 1.16 ulp without.
HWY_INLINE VF exp_nonpositive(DF d, VF x) {
  const hn::RebindToSigned<DF> di;
  x = hn::Min(hn::Max(x, hn::Set(d, -86.0f)), hn::Zero(d));
  const VF n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
  VF r = hn::NegMulAdd(n, hn::Set(d, 0.693145751953125f), x);
  r = hn::NegMulAdd(n, hn::Set(d, 1.428606765330187e-06f), r);
  VF p = hn::Set(d, 0.001394858118146658f);
  p = hn::MulAdd(p, r, hn::Set(d, 0.008375128731131554f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.041666217148303986f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.16666415333747864f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  const auto scaled = hn::Add(hn::BitCast(di, p), hn::ShiftLeft<23>(hn::ConvertTo(di, n)));
  return hn::BitCast(d, scaled);
}

// sum_i a[i] b[i], fp32, vector accumulation then one horizontal sum.
HWY_INLINE float dot(const float* a, const float* b, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF acc0 = hn::Zero(d), acc1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    acc0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), acc0);
    acc1 = hn::MulAdd(hn::LoadU(d, a + i + N), hn::LoadU(d, b + i + N), acc1);
  }
  for (; i < n; i += N) acc0 = hn::MulAdd(load_n(d, a + i, n - i), load_n(d, b + i, n - i), acc0);
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
}

// y[i] += alpha x[i] for i < n.
HWY_INLINE void axpy(float alpha, const float* x, float* y, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF a = hn::Set(d, alpha);
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::MulAdd(a, hn::LoadU(d, x + i), hn::LoadU(d, y + i)), d, y + i);
  if (i < n)
    store_n(hn::MulAdd(a, load_n(d, x + i, n - i), load_n(d, y + i, n - i)), d, y + i, n - i);
}

// y[i] = alpha x[i] c[i] for i < n (c may be nullptr: y = alpha x).
HWY_INLINE void scaled_product(float alpha, const float* x, const float* c, float* y, int64_t n) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF a = hn::Set(d, alpha);
  for (int64_t i = 0; i < n; i += N) {
    VF v = hn::Mul(a, load_n(d, x + i, n - i));
    if (c != nullptr) v = hn::Mul(v, load_n(d, c + i, n - i));
    store_n(v, d, y + i, n - i);
  }
}

// dst[i] = src[i] widened from IEEE half (binary16) to fp32, i < n (exact: every half is
// a float). The tail goes through a zero-padded stack copy, so src[n..] is never read.
HWY_INLINE void widen_f16(const hwy::float16_t* src, float* dst, int64_t n) {
  const DF d;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::PromoteTo(d, hn::LoadU(dh, src + i)), d, dst + i);
  if (i < n) {
    HWY_ALIGN hwy::float16_t buf[hn::MaxLanes(DF())] = {};
    std::copy(src + i, src + n, buf);
    store_n(hn::PromoteTo(d, hn::Load(dh, buf)), d, dst + i, n - i);
  }
}

// OAL feature maps (oal_plan.h layout), per target: m(x) and coef ⊙ m(x) into out[0, Df).
HWY_INLINE void monomials(const float* x, int64_t d, float* out) {
  out[0] = 1.0f;
  std::copy(x, x + d, out + 1);
  float* o = out + 1 + d;
  for (int64_t r = 0; r < d; ++r) {
    scaled_product(x[r], x + r, nullptr, o, d - r);
    o += d - r;
  }
}

HWY_INLINE void query_features(const float* x, int64_t d, const float* coef, float* out) {
  out[0] = coef[0];
  scaled_product(1.0f, x, coef + 1, out + 1, d);
  int64_t f = 1 + d;
  for (int64_t r = 0; r < d; ++r) {
    scaled_product(x[r], x + r, coef + f, out + f, d - r);
    f += d - r;
  }
}

}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggled include guard
