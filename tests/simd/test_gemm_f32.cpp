// gemm_f32 against a fp64 triple loop: the own micro-kernel on every SIMD target this CPU
// runs, the BLAS backend, the automatic choice, and the scalar reference loop.
#include <gtest/gtest.h>

#include <c10/util/Half.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "oal/simd/gemm_choice.h"
#include "oal/simd/gemm_f32.h"
#include "oal/simd/isa.h"
#include "random_data.h"

namespace simd = oal::simd;

namespace {

using oal::test::uniform;

using GemmFn = void (*)(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                       int64_t, float*, int64_t, bool);

void check_case(GemmFn gemm, const std::string& what, int64_t M, int64_t N, int64_t K,
                bool trans_a, bool accumulate) {
  const int64_t ldb = N + 3, ldc = N + 5;  // padded rows: strides are honoured
  const auto a = uniform(M * K, 1), b = uniform(K * ldb, 2);
  auto c = uniform(M * ldc, 3);
  const auto c0 = c;
  const int64_t a_rs = trans_a ? 1 : K, a_cs = trans_a ? M : 1;
  gemm(M, N, K, a.data(), a_rs, a_cs, b.data(), ldb, c.data(), ldc, accumulate);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < ldc; ++n) {
      if (n >= N) {  // padding must be untouched
        ASSERT_EQ(c[m * ldc + n], c0[m * ldc + n]);
        continue;
      }
      double ref = accumulate ? c0[m * ldc + n] : 0.0;
      for (int64_t k = 0; k < K; ++k)
        ref += static_cast<double>(a[m * a_rs + k * a_cs]) * b[k * ldb + n];
      // fp32 accumulation of K products of magnitude <= 1: rounding error grows at most
      // like K * 2^-24 * sum|a b| <= K^2 * 6e-8; 2e-6 * K is far above the typical error
      // yet far below any indexing mistake (O(1)).
      ASSERT_NEAR(c[m * ldc + n], ref, 2e-6 * (K + 1))
          << what << " M=" << M << " N=" << N << " K=" << K
          << " m=" << m << " n=" << n;
    }
  }
}

}  // namespace

TEST(GemmF32, MatchesFp64OnOddShapes) {
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 1, 1}, {7, 13, 5}, {6, 64, 128}, {13, 65, 300}, {50, 17, 129}, {5, 130, 3}, {3, 16, 0}};
  auto sweep = [&](GemmFn gemm, const std::string& what) {
    for (auto [M, N, K] : shapes)
      for (bool ta : {false, true})
        for (bool acc : {false, true}) check_case(gemm, what, M, N, K, ta, acc);
  };
  for (simd::SimdTarget isa : simd::available_targets()) {
    simd::ScopedTarget guard(isa);
    sweep(&simd::gemm_f32_own, "own " + simd::target_name(isa));
    sweep(&simd::gemm_f32, "automatic " + simd::target_name(isa));
  }
  sweep(&simd::gemm_f32_scalar, "scalar reference");
  ASSERT_TRUE(simd::blas_available()) << "LibTorch's BLAS (cblas_sgemm) should be loaded";
  sweep(&simd::gemm_f32_blas, "blas");
}

TEST(GemmF32, HalfBIsTheProductWithTheWidenedB) {
  // B held as IEEE half and widened as it is loaded: the same product as gemm_f32_scalar
  // on B rounded to half and stored as fp32 (widening is exact), up to summation order
  // (the tolerance of check_case). Row strides padded, tails of every length, C padding
  // untouched.
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {1, 1, 1}, {3, 17, 64}, {7, 256, 64}, {7, 64, 256}, {13, 65, 300}, {6, 5, 3}};
  for (simd::SimdTarget isa : simd::available_targets()) {
    simd::ScopedTarget guard(isa);
    for (auto [M, N, K] : shapes)
      for (bool acc : {false, true}) {
        const int64_t ldb = N + 3, ldc = N + 5;
        const auto a = uniform(M * K, 1), bf = uniform(K * ldb, 2);
        std::vector<uint16_t> bh(bf.size());
        std::vector<float> bw(bf.size());
        for (size_t i = 0; i < bf.size(); ++i) {
          const c10::Half h(bf[i]);
          bh[i] = h.x;
          bw[i] = static_cast<float>(h);
        }
        auto c = uniform(M * ldc, 3), ref = c;
        simd::gemm_f32_half_b(M, N, K, a.data(), K, 1, bh.data(), ldb, c.data(), ldc, acc);
        simd::gemm_f32_scalar(M, N, K, a.data(), K, 1, bw.data(), ldb, ref.data(), ldc, acc);
        for (int64_t i = 0; i < M * ldc; ++i) {
          if (i % ldc >= N) {
            ASSERT_EQ(c[i], ref[i]) << "padding written at " << i;
            continue;
          }
          ASSERT_NEAR(c[i], ref[i], 2e-6 * (K + 1))
              << simd::target_name(isa) << " M=" << M << " N=" << N << " K=" << K << " at " << i;
        }
      }
  }
}

TEST(GemmF32, PolicyForcesTheBackend) {
  const simd::GemmPolicy saved = simd::set_gemm_policy(simd::GemmPolicy::blas);
  EXPECT_EQ(simd::gemm_choice(64, 64, 64, 64, 1), simd::GemmBackend::blas);
  // A without a unit stride cannot go to BLAS: the own kernel takes it.
  EXPECT_EQ(simd::gemm_choice(64, 64, 64, 3, 5), simd::GemmBackend::own);
  simd::set_gemm_policy(simd::GemmPolicy::own);
  EXPECT_EQ(simd::gemm_choice(448, 64, 2145, 2145, 1), simd::GemmBackend::own);
  simd::set_gemm_policy(saved);
}

TEST(GemmF32, AutomaticRuleKeepsTheKernelsOnTheOwnMicroKernel) {
  ASSERT_EQ(simd::gemm_policy(), simd::GemmPolicy::automatic);
  for (simd::SimdTarget t : simd::available_targets()) {
    simd::ScopedTarget guard(t);
    // The kernels' shapes: flash tiles, OAL readout and (transposed-A) update.
    EXPECT_EQ(simd::gemm_choice(64, 64, 64, 64, 1), simd::GemmBackend::own);
    EXPECT_EQ(simd::gemm_choice(448, 64, 2145, 2145, 1), simd::GemmBackend::own);
    EXPECT_EQ(simd::gemm_choice(2145, 64, 64, 1, 2145), simd::GemmBackend::own);
    // Big products go to whichever backend measured faster for this target.
    EXPECT_EQ(simd::gemm_choice(1024, 1024, 1024, 1024, 1), simd::big_gemm_backend())
        << simd::target_name(t);
  }
}

