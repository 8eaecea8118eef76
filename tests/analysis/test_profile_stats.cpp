// Orderings, shares and rank agreement of contribution profiles; the Gaussian control;
// the activation summary.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "oal/analysis/activation_profile.h"
#include "oal/analysis/gaussian_control.h"
#include "oal/analysis/profile_stats.h"
#include "oal/core/error.h"

namespace oa = oal::analysis;
using Dims = std::vector<int64_t>;

TEST(ProfileStats, StableAscendingOrderKeepsIndexOrderOnTies) {
  EXPECT_EQ(oa::ascending_order({3, 1, 1, 2}), (Dims{1, 2, 3, 0}));
  EXPECT_EQ(oa::ascending_order({0, 0, 0}), (Dims{0, 1, 2}));
  EXPECT_EQ(oa::top_k_dims({3, 5, 5, 1}, 2), (Dims{1, 2}));
  EXPECT_THROW(oa::top_k_dims({1, 2}, 3), oal::Error);
}

TEST(ProfileStats, TopKShare) {
  EXPECT_DOUBLE_EQ(oa::top_k_share({1, 2, 3, 4}, 2), 0.7);
  EXPECT_DOUBLE_EQ(oa::share_of({1, 2, 3, 4}, {0}), 0.1);
  EXPECT_THROW(oa::top_k_share({1, -2, 3}, 1), oal::Error);  // shares need magnitudes
  EXPECT_THROW(oa::top_k_share({0, 0}, 1), oal::Error);
}

TEST(ProfileStats, SpearmanMatchesHandComputedValues) {
  EXPECT_DOUBLE_EQ(oa::spearman_rho({1, 2, 3}, {10, 20, 30}), 1.0);
  EXPECT_DOUBLE_EQ(oa::spearman_rho({1, 2, 3}, {3, 2, 1}), -1.0);
  // No ties: 1 - 6 Σ d² / (n (n² - 1)) = 1 - 6·4/120 = 0.8.
  EXPECT_NEAR(oa::spearman_rho({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);
  // Ties get average ranks [1, 2.5, 2.5, 4]: ρ = 4.5 / sqrt(4.5 · 5).
  EXPECT_NEAR(oa::spearman_rho({1, 2, 2, 3}, {1, 2, 3, 4}), 4.5 / std::sqrt(22.5), 1e-12);
  EXPECT_EQ(oa::spearman_rho({1, 1, 1}, {1, 2, 3}), 0.0);
  EXPECT_THROW(oa::spearman_rho({1}, {1}), oal::Error);
  EXPECT_EQ(oa::top_k_overlap({5, 4, 3, 2, 1}, {1, 4, 3, 2, 5}, 2), 1);
}

TEST(GaussianControl, StandardNormalIsDeterministicWithUnitMoments) {
  at::Tensor a = oa::standard_normal({200001}, 9), b = oa::standard_normal({200001}, 9);
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, oa::standard_normal({200001}, 10)));
  // Standard errors: mean 1/sqrt(2e5) ≈ 0.0022, variance sqrt(2/2e5) ≈ 0.0032.
  EXPECT_NEAR(a.mean().item<double>(), 0.0, 0.012);
  EXPECT_NEAR(a.var().item<double>(), 1.0, 0.016);
}

TEST(GaussianControl, IsotropicShareIsNearKOverD) {
  // Every A_r has expectation (2/π)/sqrt(d), so the top-5 share of d = 64 is just above
  // 5/64 = 7.8% (the paper's Fig. 5 controls: 7.82%); sampling noise lifts the top few.
  std::vector<int64_t> lengths(40, 64);
  at::Tensor mag = oa::gaussian_control_magnitudes(lengths, 2, 1, 64, 123);
  ASSERT_EQ(mag.sizes(), (std::vector<int64_t>{2, 64}));
  for (int64_t h = 0; h < 2; ++h) {
    at::Tensor row = mag[h].contiguous();
    std::vector<double> v(row.data_ptr<double>(), row.data_ptr<double>() + 64);
    const double share = oa::top_k_share(v, 5);
    EXPECT_GT(share, 5.0 / 64.0);
    EXPECT_LT(share, 0.09);
    EXPECT_NEAR(row.mean().item<double>(), (2.0 / M_PI) / 8.0, 0.003);
  }
}

TEST(ActivationProfile, RunningMaxAndSummary) {
  oa::ActivationMax m;
  m.update(at::tensor({1.0, -5.0, 0.5, 2.0}).view({1, 1, 4}));
  m.update(at::tensor({-3.0, 1.0, 0.5, 1.0, 0.0, 0.0, 0.0, 0.0}).view({1, 2, 4}));
  EXPECT_EQ(m.max_abs(), (std::vector<double>{3, 5, 0.5, 2}));
  oa::ActivationSummary s = oa::summarize_activations(m.max_abs());
  EXPECT_EQ(s.top_dims, (Dims{1, 0, 3}));
  EXPECT_EQ(s.top_values, (std::vector<double>{5, 3, 2}));
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_THROW(m.update(at::zeros({1, 1, 3})), oal::Error);
  EXPECT_THROW(oa::summarize_activations({}), oal::Error);
  EXPECT_DOUBLE_EQ(oa::summarize_activations({4, 1, 9}).median, 4.0);
}
