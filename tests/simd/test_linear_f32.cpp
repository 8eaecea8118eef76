// linear_f32 (model projections) against a fp64 loop: the streaming decode pass and the
// packed big-product path, on every SIMD target and with each GEMM backend.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <vector>

#include "oal/core/error.h"
#include "oal/simd/gemm_choice.h"
#include "oal/simd/isa.h"
#include "random_data.h"
#include "oal/simd/linear_f32.h"

namespace simd = oal::simd;

namespace {

using oal::test::uniform;

void check_case(int64_t M, int64_t N, int64_t K, bool with_bias, const std::string& what) {
  const auto x = uniform(M * K, 1), w = uniform(N * K, 2), b = uniform(N, 3);
  std::vector<float> y(M * N, -7.0f);
  simd::linear_f32(M, N, K, x.data(), w.data(), with_bias ? b.data() : nullptr, y.data());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = with_bias ? b[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(x[m * K + k]) * w[n * K + k];
      // fp32 sums of K products of magnitude <= 1 (see test_gemm_f32.cpp): 2e-6 per term.
      ASSERT_NEAR(y[m * N + n], ref, 2e-6 * (K + 1))
          << what << " M=" << M << " N=" << N << " K=" << K << " m=" << m << " n=" << n;
    }
}

}  // namespace

TEST(LinearF32, MatchesFp64OnEveryTargetAndBackend) {
  // M <= 8 is the streaming pass; larger M the packed product (panels of 128 columns,
  // 256-deep K slices, 512-row blocks: 600 x 130 x 300 crosses every boundary).
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 1}, {1, 70, 33}, {3, 130, 300}, {8, 17, 5}, {9, 65, 70}, {600, 130, 300}};
  for (simd::SimdTarget t : simd::available_targets()) {
    simd::ScopedTarget guard(t);
    for (auto policy :
         {simd::GemmPolicy::own, simd::GemmPolicy::blas, simd::GemmPolicy::automatic}) {
      const simd::GemmPolicy saved = simd::set_gemm_policy(policy);
      for (const auto& [M, N, K] : shapes)
        for (bool bias : {false, true})
          check_case(M, N, K, bias,
                     simd::target_name(t) + " policy " + std::to_string(int(policy)));
      simd::set_gemm_policy(saved);
    }
  }
}

TEST(LinearF32, RejectsEmptySizes) {
  float x = 0, w = 0, y = 0;
  EXPECT_THROW(simd::linear_f32(0, 1, 1, &x, &w, nullptr, &y), oal::Error);
}
