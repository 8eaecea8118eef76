// App. B grouping on hand-made profiles with hand-computed cuts, the fallback order and
// its ties, the bootstrap's determinism and support, the fixed-budget variant and bad
// options.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "oal/analysis/bootstrap.h"
#include "oal/analysis/grouping.h"
#include "oal/core/error.h"

namespace oa = oal::analysis;

namespace {

// P identical prompt rows: every bootstrap replicate equals the full-sample profile, so
// R_k^(b) = ρ_k and S_k is exactly 0 or 1.
at::Tensor identical_prompts(const std::vector<double>& chi, int64_t prompts) {
  return at::tensor(chi, at::kDouble).view({1, -1}).repeat({prompts, 1});
}

using Dims = std::vector<int64_t>;

}  // namespace

TEST(Grouping, CandidatePositionsFollowTheTailFraction) {
  EXPECT_EQ(oa::candidate_positions(64, 0.25), (Dims{48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58,
                                                     59, 60, 61, 62, 63}));
  EXPECT_EQ(oa::candidate_positions(8, 0.25), (Dims{6, 7}));
  EXPECT_EQ(oa::candidate_positions(8, 0.3), (Dims{5, 6, 7}));  // ceil(2.4) = 3
  EXPECT_EQ(oa::candidate_positions(8, 1.0), (Dims{1, 2, 3, 4, 5, 6, 7}));  // max(1, 0) = 1
  EXPECT_EQ(oa::candidate_positions(2, 0.01), (Dims{1}));
}

TEST(Grouping, NaturalCutsOnAHandMadeProfile) {
  // Sorted: dim 0 .10, 3 .12, 2 .15, 4 .18, 1 .20, 6 .25, 5 1.0, 7 4.0. With α = 0.5 the
  // candidates are k = 4..7 with ρ = .20/.18, .25/.20, 1.0/.25 = 4, 4.0/1.0 = 4.
  const std::vector<double> chi{0.10, 0.20, 0.15, 0.12, 0.18, 1.0, 0.25, 4.0};
  oa::GroupingOptions o;
  o.alpha = 0.5;
  o.bootstrap = 50;
  oa::Grouping g = oa::group_dimensions(identical_prompts(chi, 3), o);
  EXPECT_EQ(g.order, (Dims{0, 3, 2, 4, 1, 6, 5, 7}));
  ASSERT_EQ(g.candidates.size(), 4u);
  EXPECT_NEAR(g.candidates[0].rho, 0.20 / 0.18, 1e-12);
  EXPECT_NEAR(g.candidates[1].rho, 1.25, 1e-12);
  EXPECT_NEAR(g.candidates[2].rho, 4.0, 1e-12);
  EXPECT_NEAR(g.candidates[3].rho, 4.0, 1e-12);
  EXPECT_EQ(g.candidates[0].support, 0.0);
  EXPECT_EQ(g.candidates[2].support, 1.0);
  EXPECT_EQ(g.cuts, (Dims{6, 7}));
  EXPECT_EQ(g.natural_cuts, 2);
  ASSERT_EQ(g.num_groups(), 3);
  EXPECT_EQ(g.groups[0], (Dims{0, 1, 2, 3, 4, 6}));  // bulk first
  EXPECT_EQ(g.groups[1], (Dims{5}));
  EXPECT_EQ(g.groups[2], (Dims{7}));
  EXPECT_EQ(g.group_of, (Dims{0, 0, 0, 0, 0, 1, 0, 2}));
}

TEST(Grouping, NoNaturalCutFallsBackToTheFirstTiedCandidate) {
  // Powers of two: every ρ_k = 2 exactly, below τ = 2.5, so S_k = 0 too. The two
  // candidates (α = 0.25, d = 8 → k = 6, 7) tie exactly on (S, ρ) = (0, 2); the tie
  // keeps candidate order, so the single fallback cut is k = 6.
  const std::vector<double> chi{8, 1, 64, 2, 128, 4, 16, 32};
  oa::GroupingOptions o;
  o.tau = 2.5;
  o.bootstrap = 20;
  oa::Grouping g = oa::group_dimensions(identical_prompts(chi, 4), o);
  EXPECT_EQ(g.natural_cuts, 0);
  EXPECT_EQ(g.cuts, (Dims{6}));
  ASSERT_EQ(g.num_groups(), 2);
  EXPECT_EQ(g.groups[0], (Dims{0, 1, 3, 5, 6, 7}));
  EXPECT_EQ(g.groups[1], (Dims{2, 4}));
  // G_min = 3 takes both candidates.
  o.g_min = 3;
  EXPECT_EQ(oa::group_dimensions(identical_prompts(chi, 4), o).cuts, (Dims{6, 7}));
  // G_min = 1 allows the single global group.
  o.g_min = 1;
  oa::Grouping one = oa::group_dimensions(identical_prompts(chi, 4), o);
  EXPECT_TRUE(one.cuts.empty());
  EXPECT_EQ(one.num_groups(), 1);
}

TEST(Grouping, FallbackOrderIsDescendingSupportThenGapRatio) {
  // τ = 1.5, γ = 0.9. k=3 has ρ >= τ but S < γ, so it is not natural.
  std::vector<oa::CandidateCut> c{
      {3, 9.0, 0.50}, {4, 1.20, 0.80}, {5, 1.10, 0.80}, {6, 1.30, 0.80}, {7, 2.00, 0.95}};
  std::vector<int64_t> cuts = oa::select_cuts(c, 1.5, 0.9, 2);
  EXPECT_EQ(cuts, (Dims{7}));  // the natural cut alone reaches G_min = 2
  EXPECT_TRUE(c[4].natural);
  EXPECT_FALSE(c[0].natural);
  // G_min = 4: fallback order (0.8, 1.3) k=6, (0.8, 1.2) k=4, (0.8, 1.1) k=5, (0.5, 9) k=3.
  cuts = oa::select_cuts(c, 1.5, 0.9, 4);
  EXPECT_EQ(cuts, (Dims{4, 6, 7}));
  cuts = oa::select_cuts(c, 1.5, 0.9, 6);
  EXPECT_EQ(cuts, (Dims{3, 4, 5, 6, 7}));
  // Support outranks a much larger gap ratio.
  std::vector<oa::CandidateCut> s{{5, 100.0, 0.2}, {6, 1.01, 0.3}};
  EXPECT_EQ(oa::select_cuts(s, 1.5, 0.9, 2), (Dims{6}));
  // Exact ties keep candidate order.
  std::vector<oa::CandidateCut> t{{5, 1.2, 0.5}, {6, 1.2, 0.5}, {7, 1.2, 0.5}};
  EXPECT_EQ(oa::select_cuts(t, 1.5, 0.9, 3), (Dims{5, 6}));
  // Natural cuts are all kept even beyond G_min (no maximum group count).
  std::vector<oa::CandidateCut> n{{5, 2.0, 1.0}, {6, 3.0, 0.95}, {7, 1.6, 0.9}};
  EXPECT_EQ(oa::select_cuts(n, 1.5, 0.9, 2), (Dims{5, 6, 7}));
}

TEST(Grouping, GapRatioUsesTheEpsilonFloor) {
  // Sorted: -1 (dim 1), 0 (dim 0), 2 (dim 2). ρ_1 = 0 / max(-1, ε) = 0, ρ_2 = 2 / max(0, ε).
  const std::vector<double> chi{0.0, -1.0, 2.0};
  const std::vector<int64_t> order{1, 0, 2};
  std::vector<double> rho = oa::gap_ratios(chi, order, {1, 2}, 1e-3);
  EXPECT_EQ(rho[0], 0.0);
  EXPECT_NEAR(rho[1], 2000.0, 1e-9);
}

TEST(Grouping, BootstrapSupportMatchesItsProbability) {
  // Two prompts differ only in dim 7: 10 (prompt 0) vs 0.1 (prompt 1); all other dims 1.
  // A replicate separates dim 7 by >= 1.5 unless it drew prompt 1 twice (probability
  // 1/4), so S_7 → 0.75. With B = 4000 the standard error is sqrt(.1875/4000) ≈ 0.007;
  // 0.03 is > 4 standard errors.
  at::Tensor pp = at::ones({2, 8}, at::kDouble);
  pp[0][7] = 10.0;
  pp[1][7] = 0.1;
  oa::GroupingOptions o;
  o.bootstrap = 4000;
  o.seed = 7;
  oa::Grouping g = oa::group_dimensions(pp, o);
  ASSERT_EQ(g.candidates.back().k, 7);
  EXPECT_NEAR(g.candidates.back().support, 0.75, 0.03);
  EXPECT_NEAR(g.candidates.back().rho, 5.05, 1e-12);  // (10 + 0.1) / 2 over 1
  EXPECT_FALSE(g.candidates.back().natural);  // 0.75 < γ = 0.9
  EXPECT_EQ(g.cuts, (Dims{7}));               // but it is the best fallback
  o.gamma = 0.7;
  EXPECT_TRUE(oa::group_dimensions(pp, o).candidates.back().natural);
}

TEST(Grouping, BootstrapSupportMatchesAPlainRecount) {
  // Recount S_k with explicit loops over the same index sets.
  at::manual_seed(5);
  at::Tensor pp = at::rand({9, 8}, at::kDouble) + at::arange(8, at::kDouble).pow(2).view({1, 8});
  const std::vector<int64_t> ks{5, 6, 7};
  std::vector<double> chi(8);
  for (int r = 0; r < 8; ++r) chi[r] = pp.select(1, r).mean().item<double>();
  std::vector<int64_t> order{0, 1, 2, 3, 4, 5, 6, 7};
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return chi[a] < chi[b]; });
  auto sets = oa::bootstrap_index_sets(9, 300, 11);
  std::vector<double> s = oa::bootstrap_supports(pp, order, ks, sets, 1.3, 1e-12);
  for (size_t c = 0; c < ks.size(); ++c) {
    int hits = 0;
    for (const auto& set : sets) {
      std::vector<double> cb(8, 0.0);
      for (int64_t p : set)
        for (int r = 0; r < 8; ++r) cb[r] += pp[p][r].item<double>() / 9.0;
      double lo = -1e300, hi = 1e300;
      for (int64_t t = 0; t < ks[c]; ++t) lo = std::max(lo, cb[order[t]]);
      for (int64_t t = ks[c]; t < 8; ++t) hi = std::min(hi, cb[order[t]]);
      hits += hi / std::max(lo, 1e-12) >= 1.3 ? 1 : 0;
    }
    EXPECT_EQ(s[c], hits / 300.0) << "k=" << ks[c];
  }
}

TEST(Grouping, BootstrapIsDeterministicUnderASeed) {
  EXPECT_EQ(oa::SplitMix64(0).next(), 0xE220A8397B1DCDAFull);  // published SplitMix64 value
  EXPECT_EQ(oa::bootstrap_index_sets(40, 10, 3), oa::bootstrap_index_sets(40, 10, 3));
  EXPECT_NE(oa::bootstrap_index_sets(40, 10, 3), oa::bootstrap_index_sets(40, 10, 4));
  at::manual_seed(6);
  at::Tensor pp = at::rand({12, 16}, at::kDouble) * at::linspace(1, 3, 16, at::kDouble);
  oa::GroupingOptions o;
  o.bootstrap = 200;
  o.seed = 42;
  oa::Grouping a = oa::group_dimensions(pp, o), b = oa::group_dimensions(pp, o);
  for (size_t i = 0; i < a.candidates.size(); ++i)
    EXPECT_EQ(a.candidates[i].support, b.candidates[i].support);
  EXPECT_EQ(a.cuts, b.cuts);
  // Every index set draws from {0..P-1} and covers it over many draws.
  auto sets = oa::bootstrap_index_sets(5, 200, 1);
  std::vector<int> seen(5, 0);
  for (const auto& s : sets)
    for (int64_t i : s) {
      ASSERT_TRUE(i >= 0 && i < 5);
      ++seen[i];
    }
  for (int c : seen) EXPECT_GT(c, 100);
}

TEST(Grouping, FixedBudgetTakesTheLargestGaps) {
  // Sorted values 1, 2, 3, 3.5, 4, 5, 20, 50 (dims 0, 6, 1, 7, 5, 3, 4, 2); gaps at
  // k = 1..7: 1, 1, .5, .5, 1, 15, 30.
  const std::vector<double> chi{1, 3, 50, 5, 20, 4, 2, 3.5};
  oa::Grouping g3 = oa::group_fixed_budget(chi, 3);
  EXPECT_EQ(g3.cuts, (Dims{6, 7}));
  EXPECT_EQ(g3.groups, (std::vector<Dims>{{0, 1, 3, 5, 6, 7}, {4}, {2}}));
  // Budget 4: the gap of 1 ties at k = 1, 2, 5; the one nearest the tail (k = 5) wins.
  oa::Grouping g4 = oa::group_fixed_budget(chi, 4);
  EXPECT_EQ(g4.cuts, (Dims{5, 6, 7}));
  EXPECT_EQ(g4.groups, (std::vector<Dims>{{0, 1, 5, 6, 7}, {3}, {4}, {2}}));
  EXPECT_EQ(oa::group_fixed_budget(chi, 1).num_groups(), 1);
  EXPECT_EQ(oa::group_fixed_budget(chi, 8).num_groups(), 8);
  EXPECT_THROW(oa::group_fixed_budget(chi, 0), oal::Error);
  EXPECT_THROW(oa::group_fixed_budget(chi, 9), oal::Error);
}

TEST(Grouping, BadOptionsAndInputAreRejected) {
  at::Tensor pp = at::rand({4, 8}, at::kDouble);
  auto with = [&](auto edit) {
    oa::GroupingOptions o;
    o.bootstrap = 10;
    edit(o);
    return o;
  };
  EXPECT_THROW(oa::group_dimensions(pp, with([](auto& o) { o.alpha = 0.0; })), oal::Error);
  EXPECT_THROW(oa::group_dimensions(pp, with([](auto& o) { o.alpha = 1.5; })), oal::Error);
  EXPECT_THROW(oa::group_dimensions(pp, with([](auto& o) { o.gamma = 1.1; })), oal::Error);
  EXPECT_THROW(oa::group_dimensions(pp, with([](auto& o) { o.tau = 0.0; })), oal::Error);
  EXPECT_THROW(oa::group_dimensions(pp, with([](auto& o) { o.g_min = 0; })), oal::Error);
  EXPECT_THROW(oa::group_dimensions(pp, with([](auto& o) { o.bootstrap = 0; })), oal::Error);
  // d = 8, α = 0.25 → two candidates: at most 3 groups.
  EXPECT_THROW(oa::group_dimensions(pp, with([](auto& o) { o.g_min = 4; })), oal::Error);
  EXPECT_NO_THROW(oa::group_dimensions(pp, with([](auto& o) { o.alpha = 1.0; })));
  EXPECT_THROW(oa::group_dimensions(at::rand({1, 8}, at::kDouble), with([](auto&) {})), oal::Error);
  at::Tensor nan = pp.clone();
  nan[1][2] = NAN;
  EXPECT_THROW(oa::group_dimensions(nan, with([](auto&) {})), oal::Error);
  try {
    oa::group_dimensions(pp, with([](auto& o) { o.alpha = 2.0; }));
    FAIL() << "expected an error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("alpha"), std::string::npos) << e.what();
  }
}
