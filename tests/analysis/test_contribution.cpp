// Contribution scores χ (Eq. 2): the O(N d) prefix-sum form against the plain O(N² d)
// pair loop, hand-computed values, the GQA mapping, prefixes and prompt averaging.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "oal/analysis/contribution.h"
#include "oal/core/error.h"

namespace oa = oal::analysis;

namespace {

struct Shape {
  int64_t b, hq, hkv, t, d;
};

// Both forms sum the same fp64 products in different orders; with O(1) inputs and at
// most ~100 pairs per entry, reassociation error is ~1e-14 relative to the sum of |terms|.
constexpr double k_fp64_tol = 1e-11;

}  // namespace

TEST(Contribution, PrefixSumMatchesPairLoopAcrossShapesAndGqa) {
  at::manual_seed(1);
  for (Shape s : {Shape{1, 1, 1, 1, 1}, Shape{2, 4, 2, 7, 8}, Shape{1, 7, 1, 13, 16},
                  Shape{3, 2, 2, 2, 64}, Shape{1, 6, 3, 9, 5}}) {
    at::Tensor q = at::randn({s.b, s.hq, s.t, s.d}, at::kDouble);
    at::Tensor k = at::randn({s.b, s.hkv, s.t, s.d}, at::kDouble);
    at::Tensor fast = oa::contribution_scores(q, k);
    at::Tensor ref = oa::contribution_scores_reference(q, k);
    ASSERT_EQ(fast.sizes(), (std::vector<int64_t>{s.b, s.hq, s.d}));
    EXPECT_EQ(fast.scalar_type(), at::kDouble);
    EXPECT_TRUE(at::allclose(fast, ref, k_fp64_tol, k_fp64_tol)) << "shape t=" << s.t;
  }
}

TEST(Contribution, Fp32InputIsAccumulatedInFp64) {
  at::manual_seed(2);
  at::Tensor q = at::randn({1, 4, 31, 8}) * 20;
  at::Tensor k = at::randn({1, 2, 31, 8}) * 20;
  // The fp32 values are exactly representable in fp64, so both paths see identical
  // inputs and agree to fp64 reassociation error (relative 1e-11 on values ~1e2).
  EXPECT_TRUE(at::allclose(oa::contribution_scores(q, k), oa::contribution_scores_reference(q, k),
                           1e-11, 1e-9));
}

TEST(Contribution, HandComputedValue) {
  // N = 2, d = 1: χ = (q1 k1 + q2 (k1 + k2)) / (sqrt(1) · 3) = (3 + 2·7) / 3.
  at::Tensor q = at::tensor({1.0, 2.0}, at::kDouble).view({1, 1, 2, 1});
  at::Tensor k = at::tensor({3.0, 4.0}, at::kDouble).view({1, 1, 2, 1});
  EXPECT_NEAR(oa::contribution_scores(q, k).item<double>(), 17.0 / 3.0, 1e-15);
  // d = 4 scales by 1 / sqrt(4): only dimension 2 is non-zero.
  at::Tensor q4 = at::zeros({1, 1, 2, 4}, at::kDouble), k4 = at::zeros({1, 1, 2, 4}, at::kDouble);
  q4.select(3, 2).copy_(q.view({1, 1, 2}));
  k4.select(3, 2).copy_(k.view({1, 1, 2}));
  at::Tensor chi = oa::contribution_scores(q4, k4);
  EXPECT_NEAR(chi[0][0][2].item<double>(), 17.0 / 6.0, 1e-15);
  EXPECT_EQ(chi[0][0][0].item<double>(), 0.0);
}

TEST(Contribution, GqaQueryHeadReadsItsOwnKvHead) {
  // Hq = 4, Hkv = 2: query heads 0,1 read KV head 0 (all zero), heads 2,3 read KV head 1.
  at::Tensor q = at::ones({1, 4, 3, 2}, at::kDouble);
  at::Tensor k = at::zeros({1, 2, 3, 2}, at::kDouble);
  k.select(1, 1).fill_(1.0);
  at::Tensor chi = oa::contribution_scores(q, k);
  EXPECT_EQ(chi[0][0].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(chi[0][1].abs().sum().item<double>(), 0.0);
  // Every causal pair contributes 1 / sqrt(2), so the mean is exactly 1 / sqrt(2).
  EXPECT_NEAR(chi[0][2][0].item<double>(), 1.0 / std::sqrt(2.0), 1e-15);
  EXPECT_NEAR(chi[0][3][1].item<double>(), 1.0 / std::sqrt(2.0), 1e-15);
}

TEST(Contribution, MagnitudesAreTheScoresOfAbsoluteValues) {
  at::manual_seed(3);
  at::Tensor q = at::randn({2, 4, 9, 8}, at::kDouble), k = at::randn({2, 2, 9, 8}, at::kDouble);
  at::Tensor mag = oa::contribution_magnitudes(q, k);
  EXPECT_TRUE(at::allclose(mag, oa::contribution_scores_reference(q.abs(), k.abs()), k_fp64_tol,
                           k_fp64_tol));
  EXPECT_TRUE((mag >= oa::contribution_scores(q, k).abs() - 1e-12).all().item<bool>());
}

TEST(Contribution, EveryPrefixMatchesTheTruncatedSequence) {
  at::manual_seed(4);
  at::Tensor q = at::randn({1, 4, 11, 8}, at::kDouble), k = at::randn({1, 2, 11, 8}, at::kDouble);
  at::Tensor curve = oa::contribution_scores_by_prefix(q, k);
  ASSERT_EQ(curve.sizes(), (std::vector<int64_t>{1, 4, 11, 8}));
  for (int64_t n : {1, 2, 5, 11}) {
    at::Tensor ref = oa::contribution_scores_reference(q.narrow(2, 0, n), k.narrow(2, 0, n));
    EXPECT_TRUE(at::allclose(curve.select(2, n - 1), ref, k_fp64_tol, k_fp64_tol)) << n;
  }
}

TEST(Contribution, PromptsAreAveragedWithEqualWeight) {
  // Prompt lengths differ; each prompt is averaged over its own pairs first.
  at::Tensor a = oa::contribution_scores(at::ones({1, 1, 1, 1}), at::ones({1, 1, 1, 1}) * 3);
  at::Tensor b = oa::contribution_scores(at::ones({1, 1, 5, 1}), at::ones({1, 1, 5, 1}));
  at::Tensor avg = oa::average_over_prompts(at::cat({a, b}, 0));
  EXPECT_NEAR(avg.item<double>(), 2.0, 1e-15);  // (3 + 1) / 2, not length-weighted
}

TEST(Contribution, BadInputIsRejected) {
  at::Tensor q = at::randn({1, 3, 4, 8}), k = at::randn({1, 2, 4, 8});
  EXPECT_THROW(oa::contribution_scores(q, k), oal::Error);  // 3 % 2 != 0
  EXPECT_THROW(oa::contribution_scores(at::randn({1, 2, 4, 8}), at::randn({1, 2, 5, 8})),
               oal::Error);
  EXPECT_THROW(oa::contribution_scores(at::randn({2, 4, 8}), at::randn({2, 4, 8})), oal::Error);
  at::Tensor bad = at::randn({1, 2, 4, 8});
  bad[0][0][1][1] = NAN;
  EXPECT_THROW(oa::contribution_scores(bad, at::randn({1, 2, 4, 8})), oal::Error);
  EXPECT_THROW(oa::contribution_scores(at::zeros({1, 2, 0, 8}), at::zeros({1, 2, 0, 8})),
               oal::Error);
  EXPECT_THROW(oa::average_over_prompts(at::zeros({0, 8})), oal::Error);
}
