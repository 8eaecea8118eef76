#include "oal/kernels/cpu/gemm_f32.h"

#include <algorithm>

#include "oal/kernels/cpu/isa.h"
#include "oal/kernels/cpu/simd_avx512.h"

namespace oal::kernels::cpu {
namespace {

constexpr int k_mr = 6;        // rows per register tile
constexpr int k_nv = 4;        // 16-float vectors per register tile row (64 columns)
constexpr int64_t k_kc = 128;  // K panel: a 128 x 64 fp32 B panel (32 KiB) stays in L1

// One MR x (NV*16) tile of C over K steps; the last vector of each row is masked.
template <int MR, int NV>
OAL_AVX512 void tile(int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                     int64_t ldb, float* c, int64_t ldc, bool load_c, __mmask16 last) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mk = v == NV - 1 ? last : static_cast<__mmask16>(0xFFFF);
      acc[m][v] = load_c ? _mm512_maskz_loadu_ps(mk, c + m * ldc + 16 * v) : _mm512_setzero_ps();
    }
  const float* arow[MR];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) arow[m] = a + m * a_rs;
  for (int64_t k = 0; k < K; ++k) {
    __m512 bv[NV];
    const float* bk = b + k * ldb;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(last, bk + 16 * v) : _mm512_loadu_ps(bk + 16 * v);
    const int64_t ko = k * a_cs;
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m512 av = _mm512_set1_ps(arow[m][ko]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_fmadd_ps(av, bv[v], acc[m][v]);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mk = v == NV - 1 ? last : static_cast<__mmask16>(0xFFFF);
      _mm512_mask_storeu_ps(c + m * ldc + 16 * v, mk, acc[m][v]);
    }
}

using TileFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*,
                        int64_t, bool, __mmask16);

template <int MR>
constexpr TileFn tile_for(int nv) {
  switch (nv) {
    case 1: return &tile<MR, 1>;
    case 2: return &tile<MR, 2>;
    case 3: return &tile<MR, 3>;
    default: return &tile<MR, 4>;
  }
}

TileFn pick_tile(int mr, int nv) {
  switch (mr) {
    case 1: return tile_for<1>(nv);
    case 2: return tile_for<2>(nv);
    case 3: return tile_for<3>(nv);
    case 4: return tile_for<4>(nv);
    case 5: return tile_for<5>(nv);
    default: return tile_for<6>(nv);
  }
}

OAL_AVX512 void gemm_avx512(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs,
                            int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                            bool accumulate) {
  if (K == 0) {
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill(c + m * ldc, c + m * ldc + N, 0.0f);
    return;
  }
  for (int64_t k0 = 0; k0 < K; k0 += k_kc) {
    const int64_t kc = std::min(k_kc, K - k0);
    const bool load_c = accumulate || k0 > 0;
    for (int64_t n0 = 0; n0 < N; n0 += 16 * k_nv) {
      const int64_t nc = std::min<int64_t>(16 * k_nv, N - n0);
      const int nv = static_cast<int>((nc + 15) / 16);
      const __mmask16 last = simd::lane_mask(nc - 16 * (nv - 1));
      const float* bp = b + k0 * ldb + n0;
      const TileFn full = pick_tile(k_mr, nv);
      int64_t m0 = 0;
      for (; m0 + k_mr <= M; m0 += k_mr)
        full(kc, a + m0 * a_rs + k0 * a_cs, a_rs, a_cs, bp, ldb, c + m0 * ldc + n0, ldc, load_c,
             last);
      if (m0 < M)
        pick_tile(static_cast<int>(M - m0), nv)(kc, a + m0 * a_rs + k0 * a_cs, a_rs, a_cs, bp,
                                                ldb, c + m0 * ldc + n0, ldc, load_c, last);
    }
  }
}

}  // namespace

void gemm_f32_scalar(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs,
                     int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                     bool accumulate) {
  for (int64_t m = 0; m < M; ++m) {
    float* cm = c + m * ldc;
    if (!accumulate) std::fill(cm, cm + N, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const float av = a[m * a_rs + k * a_cs];
      const float* bk = b + k * ldb;
      for (int64_t n = 0; n < N; ++n) cm[n] += av * bk[n];
    }
  }
}

void gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs,
              const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  if (active_isa() == Isa::avx512)
    gemm_avx512(M, N, K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
  else
    gemm_f32_scalar(M, N, K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

}  // namespace oal::kernels::cpu
