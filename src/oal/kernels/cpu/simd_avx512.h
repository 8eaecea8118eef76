#pragma once
// Internal to src/oal/kernels/cpu/*.cpp: AVX-512 helpers compiled for that target only
// (the build itself targets baseline x86-64; these functions are called only after
// active_isa() == Isa::avx512 has been checked at runtime).
#include <immintrin.h>

// GCC 12 reports the intrinsics' own deliberately-undefined registers (_mm512_undefined)
// as uninitialized inside target("avx512f") functions; those warnings are false alarms.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstdint>

#define OAL_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

namespace oal::kernels::cpu::simd {

// Lanes 0..n-1 set (n in 0..16).
OAL_AVX512 inline __mmask16 lane_mask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// exp(x) for x <= 88, relative error ~2e-7: x = n ln2 + r with |r| <= ln2/2, a degree-6
// Taylor polynomial for e^r (truncation r^7/5040 < 1.2e-7) and 2^n by vscalefps.
// Inputs below -87 give ~1e-38 (callers mask exact zeros themselves).
OAL_AVX512 inline __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace oal::kernels::cpu::simd
