// The kernels' own fp32 GEMM micro-kernel, compiled once per SIMD target (Highway
// foreach_target: this file is included again for every target in simd_config.h).
#include "oal/simd/simd_config.h"
// (simd_config.h first: it selects the targets foreach_target.h compiles.)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "oal/simd/gemm_f32.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include "oal/simd/simd_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace oal::simd::HWY_NAMESPACE {
namespace {

// Register tile: MR rows x NV vectors of C. 6 x NV accumulators + NV B vectors + one
// broadcast fit the register file (6·4+4+1 = 29 of 32; 6·2+2+1 = 15 of 16).
constexpr int k_mr = 6;
constexpr int k_nv = k_vector_registers >= 32 ? 4 : 2;
constexpr int64_t k_kc = 128;  // K panel: a 128 x (NV·lanes) B panel stays in L1

// n (<= lanes) elements of B at p as fp32 lanes: fp32 as they are, IEEE half widened
// (exact; the tail through a zero-padded copy, so nothing past p[n - 1] is read).
HWY_INLINE VF load_b(DF d, const float* p, int64_t n) { return load_n(d, p, n); }
HWY_INLINE VF load_b(DF d, const hwy::float16_t* p, int64_t n) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  if (n >= static_cast<int64_t>(hn::Lanes(d))) return hn::PromoteTo(d, hn::LoadU(dh, p));
  HWY_ALIGN hwy::float16_t buf[hn::MaxLanes(DF())] = {};
  std::copy(p, p + n, buf);
  return hn::PromoteTo(d, hn::Load(dh, buf));
}

// One MR x (NV·lanes) tile of C over K steps; the last vector of each row is masked to
// `last` lanes. B is fp32 or IEEE half (TB).
template <int MR, int NV, class TB>
void tile(int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const TB* b, int64_t ldb,
          float* c, int64_t ldc, bool load_c, int64_t last) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  VF acc[MR][NV];
  #pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* p = c + m * ldc + L * v;
      acc[m][v] = !load_c ? hn::Zero(d) : v == NV - 1 ? load_n(d, p, last) : hn::LoadU(d, p);
    }
  const float* arow[MR];
  #pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) arow[m] = a + m * a_rs;
  for (int64_t k = 0; k < K; ++k) {
    VF bv[NV];
    const TB* bk = b + k * ldb;
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = load_b(d, bk + L * v, v == NV - 1 ? last : L);
    const int64_t ko = k * a_cs;
    #pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const VF av = hn::Set(d, arow[m][ko]);
      #pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[m][v] = hn::MulAdd(av, bv[v], acc[m][v]);
    }
  }
  #pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* p = c + m * ldc + L * v;
      if (v == NV - 1)
        store_n(acc[m][v], d, p, last);
      else
        hn::StoreU(acc[m][v], d, p);
    }
}

template <class TB>
using TileFn = void (*)(int64_t, const float*, int64_t, int64_t, const TB*, int64_t, float*,
                        int64_t, bool, int64_t);

template <int MR, class TB>
TileFn<TB> tile_for(int nv) {
  if constexpr (k_nv >= 4) {
    if (nv >= 4) return &tile<MR, 4, TB>;
    if (nv == 3) return &tile<MR, 3, TB>;
  }
  return nv >= 2 ? &tile<MR, 2, TB> : &tile<MR, 1, TB>;
}

template <class TB>
TileFn<TB> pick_tile(int mr, int nv) {
  switch (mr) {
    case 1: return tile_for<1, TB>(nv);
    case 2: return tile_for<2, TB>(nv);
    case 3: return tile_for<3, TB>(nv);
    case 4: return tile_for<4, TB>(nv);
    case 5: return tile_for<5, TB>(nv);
    default: return tile_for<6, TB>(nv);
  }
}

template <class TB>
void gemm_tiles(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs,
                const TB* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (K == 0) {
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill(c + m * ldc, c + m * ldc + N, 0.0f);
    return;
  }
  const int64_t L = static_cast<int64_t>(hn::Lanes(DF()));
  const int64_t width = L * k_nv;
  for (int64_t k0 = 0; k0 < K; k0 += k_kc) {
    const int64_t kc = std::min(k_kc, K - k0);
    const bool load_c = accumulate || k0 > 0;
    for (int64_t n0 = 0; n0 < N; n0 += width) {
      const int64_t nc = std::min(width, N - n0);
      const int nv = static_cast<int>((nc + L - 1) / L);
      const int64_t last = nc - L * (nv - 1);
      const TB* bp = b + k0 * ldb + n0;
      const TileFn<TB> full = pick_tile<TB>(k_mr, nv);
      int64_t m0 = 0;
      for (; m0 + k_mr <= M; m0 += k_mr)
        full(kc, a + m0 * a_rs + k0 * a_cs, a_rs, a_cs, bp, ldb, c + m0 * ldc + n0, ldc, load_c,
             last);
      if (m0 < M)
        pick_tile<TB>(static_cast<int>(M - m0), nv)(kc, a + m0 * a_rs + k0 * a_cs, a_rs, a_cs,
                                                    bp, ldb, c + m0 * ldc + n0, ldc, load_c,
                                                    last);
    }
  }
}

}  // namespace

void gemm_own(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs,
              const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  gemm_tiles(M, N, K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

void gemm_own_half_b(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs,
                     int64_t a_cs, const uint16_t* b, int64_t ldb, float* c, int64_t ldc,
                     bool accumulate) {
  gemm_tiles(M, N, K, a, a_rs, a_cs, reinterpret_cast<const hwy::float16_t*>(b), ldb, c, ldc,
             accumulate);
}

}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <dlfcn.h>

#include "oal/core/error.h"
#include "oal/simd/gemm_choice.h"
#include "oal/simd/gemm_f32.h"

namespace oal::simd {
HWY_EXPORT(gemm_own);
HWY_EXPORT(gemm_own_half_b);

namespace {

// cblas_sgemm's signature with its enums as ints (CblasRowMajor 101, NoTrans 111,
// Trans 112).
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int,
                         const float*, int, float, float*, int);

SgemmFn sgemm() {
  static const auto fn = reinterpret_cast<SgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sgemm"));
  return fn;
}

}  // namespace

bool blas_available() { return sgemm() != nullptr; }

void gemm_f32_own(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs,
                  const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  HWY_DYNAMIC_DISPATCH(gemm_own)(M, N, K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

void gemm_f32_half_b(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs,
                     int64_t a_cs, const uint16_t* b, int64_t ldb, float* c, int64_t ldc,
                     bool accumulate) {
  static_assert(sizeof(hwy::float16_t) == sizeof(uint16_t), "IEEE half is 2 bytes");
  if (M <= 0 || N <= 0) return;
  HWY_DYNAMIC_DISPATCH(gemm_own_half_b)(M, N, K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

void blas_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  check(blas_available(), "gemm_f32", "cblas_sgemm is not loaded in this process");
  // CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112.
  sgemm()(101, trans_a ? 112 : 111, trans_b ? 112 : 111, static_cast<int>(M),
          static_cast<int>(N), static_cast<int>(K), 1.0f, a, static_cast<int>(lda), b,
          static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void gemm_f32_blas(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs,
                   int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                   bool accumulate) {
  check(a_cs == 1 || a_rs == 1, "gemm_f32", "BLAS needs A with a unit stride, got ({}, {})",
        a_rs, a_cs);
  if (M <= 0 || N <= 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill(c + m * ldc, c + m * ldc + N, 0.0f);
    return;
  }
  const bool trans = a_cs != 1;  // A row-major with lda = a_rs, or Aᵀ row-major with lda = a_cs
  const int64_t lda = std::max<int64_t>(trans ? a_cs : a_rs, trans ? M : K);
  blas_sgemm(trans, false, M, N, K, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
}

void gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs,
              const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  if (gemm_choice(M, N, K, a_rs, a_cs) == GemmBackend::blas)
    gemm_f32_blas(M, N, K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
  else
    HWY_DYNAMIC_DISPATCH(gemm_own)(M, N, K, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

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

}  // namespace oal::simd
#endif  // HWY_ONCE
