// QuadraticKernel / LayerKernels: validation, packing, coefficient expansion, the G = 1
// global quadratic, the Taylor and embedded-global initialisations, padding, positivity.
#include <gtest/gtest.h>

#include <cmath>

#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/references.h"
#include "oal/attention/oal/quadratic.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::expect_error;
using oal::test::randn;
using oal::test::rel_err;

// Scores s = q·k/sqrt(d) and group sums s_g for one head, by hand: [B, T, S].
at::Tensor group_score(const at::Tensor& q, const at::Tensor& k, const std::vector<int64_t>& dims) {
  auto idx = at::tensor(dims, at::kLong);
  return at::matmul(q.index_select(-1, idx), k.index_select(-1, idx).transpose(-1, -2)) /
         std::sqrt(static_cast<double>(q.size(-1)));
}

TEST(QuadraticKernel, PackingIsRowMajorLowerTriangle) {
  QuadraticKernel k({{0, 2}, {1}}, {1, 2, 3, 4, 5, 6}, 1e-6);
  auto L = k.lower();
  EXPECT_EQ(L[0][0].item<double>(), 1);
  EXPECT_EQ(L[1][0].item<double>(), 2);
  EXPECT_EQ(L[1][1].item<double>(), 3);
  EXPECT_EQ(L[2][0].item<double>(), 4);
  EXPECT_EQ(L[2][1].item<double>(), 5);
  EXPECT_EQ(L[2][2].item<double>(), 6);
  EXPECT_EQ(L[0][1].item<double>(), 0);
  EXPECT_EQ(QuadraticKernel::pack_lower(L), k.packed_lower());
  EXPECT_EQ(k.dim(), 3);
  EXPECT_EQ(k.group_of(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(QuadraticKernel::packed_size(5), 21);
}

TEST(QuadraticKernel, CoefficientsFollowTheMapping) {
  // G = 2, L by hand; M = L Lᵀ computed here by hand.
  QuadraticKernel k({{1, 3}, {0, 2}}, {1.5, -0.5, 2.0, 0.25, 0.75, -1.0}, 0.125);
  double L[3][3] = {{1.5, 0, 0}, {-0.5, 2.0, 0}, {0.25, 0.75, -1.0}};
  double M[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      M[i][j] = 0;
      for (int c = 0; c < 3; ++c) M[i][j] += L[i][c] * L[j][c];
    }
  auto c = k.coefficients();
  EXPECT_DOUBLE_EQ(c.a, 0.125 + M[0][0]);
  int grp[4] = {2, 1, 2, 1};  // matrix index of each dimension's group
  for (int r = 0; r < 4; ++r) {
    EXPECT_DOUBLE_EQ(c.b[r].item<double>(), 2 * M[0][grp[r]]);
    for (int t = 0; t < 4; ++t) EXPECT_DOUBLE_EQ(c.C[r][t].item<double>(), M[grp[r]][grp[t]]);
  }
  EXPECT_LT(rel_err(k.matrix(), at::matmul(k.lower(), k.lower().t())), 1e-15);
}

TEST(QuadraticKernel, SingleGroupIsTheGlobalQuadratic) {
  const int64_t d = 8;
  auto q = randn({1, 1, 20, d}, 1, 1.5), k = randn({1, 1, 20, d}, 2, 1.5);
  for (uint64_t seed : {3, 4, 5}) {
    auto Lr = at::tril(randn({2, 2}, seed));
    auto ker = QuadraticKernel::from_lower(QuadraticKernel::single_group(d), Lr, 1e-6);
    double l00 = Lr[0][0].item<double>(), l10 = Lr[1][0].item<double>(), l11 = Lr[1][1].item<double>();
    double a = 1e-6 + l00 * l00, b = 2 * l00 * l10, c = l10 * l10 + l11 * l11;
    auto s = at::matmul(q[0][0], k[0][0].t()) / std::sqrt(8.0);
    auto want = a + b * s + c * s * s;
    auto lk = LayerKernels::from({ker});
    EXPECT_LT(rel_err(hd_pair_weights(q, k, lk)[0][0], want), 1e-13);
    EXPECT_LT(rel_err(hd_pair_weights_expanded(q, k, lk)[0][0], want), 1e-13);
    EXPECT_TRUE(lk.all_global());
  }
}

TEST(QuadraticKernel, TaylorIsOnePlusSPlusHalfSSquared) {
  const int64_t d = 16;
  auto q = randn({1, 1, 12, d}, 7, 1.2), k = randn({1, 1, 12, d}, 8, 1.2);
  auto s = at::matmul(q[0][0], k[0][0].t()) / 4.0;
  auto want = 1 + s + 0.5 * s * s;
  for (int64_t g : {1, 2, 5}) {
    auto ker = QuadraticKernel::taylor(oal::test::outlier_groups(d, g), 1e-6);
    EXPECT_NEAR(ker.coefficients().a, 1.0, 1e-15);  // eps absorbed: M00 = 1 - eps
    auto lk = LayerKernels::from({ker});
    EXPECT_LT(rel_err(hd_pair_weights(q, k, lk)[0][0], want), 1e-13) << "G " << g;
  }
  expect_error([] { QuadraticKernel::taylor({{0, 1}}, 0.6); }, {"[quadratic_kernel]", "eps"});
}

TEST(QuadraticKernel, EmbeddedAndPerturbedGlobal) {
  const int64_t d = 8;
  auto q = randn({1, 1, 10, d}, 9, 1.5), k = randn({1, 1, 10, d}, 10, 1.5);
  auto g1 = QuadraticKernel::from_lower(QuadraticKernel::single_group(d),
                                        at::tril(randn({2, 2}, 11)), 1e-4);
  auto groups = oal::test::outlier_groups(d, 4);
  auto emb = QuadraticKernel::embed_global(g1, groups);
  EXPECT_EQ(emb.num_groups(), 4);
  EXPECT_LT(rel_err(hd_pair_weights(q, k, LayerKernels::from({emb})),
                    hd_pair_weights(q, k, LayerKernels::from({g1}))), 1e-13);
  // global(a, b, c) gives the same polynomial in any grouping
  auto glob = QuadraticKernel::global(groups, 1.3, -0.4, 0.2, 1e-6);
  auto s = at::matmul(q[0][0], k[0][0].t()) / std::sqrt(8.0);
  EXPECT_LT(rel_err(hd_pair_weights(q, k, LayerKernels::from({glob}))[0][0],
                    1.3 - 0.4 * s + 0.2 * s * s), 1e-13);
  expect_error([&] { QuadraticKernel::global(groups, 1.0, 3.0, 0.5); }, {"positive semidefinite"});
  // perturbation: seeded, deterministic, of the requested size
  auto p1 = emb.perturbed(0.1, 42), p2 = emb.perturbed(0.1, 42), p3 = emb.perturbed(0.1, 43);
  EXPECT_EQ(p1.packed_lower(), p2.packed_lower());
  EXPECT_NE(p1.packed_lower(), p3.packed_lower());
  double sq = 0;
  for (size_t i = 0; i < p1.packed_lower().size(); ++i)
    sq += std::pow(p1.packed_lower()[i] - emb.packed_lower()[i], 2);
  double rms = std::sqrt(sq / p1.packed_lower().size());
  EXPECT_GT(rms, 0.02);
  EXPECT_LT(rms, 0.3);
  EXPECT_EQ(p1.groups(), emb.groups());
}

TEST(LayerKernels, PaddingIsExactAndRoundTrips) {
  const int64_t d = 16;
  auto kernels = oal::test::random_kernels(5, d, 5, 77);  // G = 1..5
  auto lk = LayerKernels::from(kernels);
  EXPECT_EQ(lk.max_groups(), 5);
  EXPECT_EQ(lk.groups, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_FALSE(lk.all_global());
  auto back = lk.to_kernels();
  ASSERT_EQ(back.size(), kernels.size());
  for (size_t h = 0; h < kernels.size(); ++h) {
    EXPECT_EQ(back[h].groups(), kernels[h].groups());
    EXPECT_EQ(back[h].packed_lower(), kernels[h].packed_lower());
    EXPECT_EQ(back[h].eps(), kernels[h].eps());
  }
  // Each padded head evaluates exactly as its own unpadded kernel.
  auto q = randn({1, 5, 9, d}, 5), k = randn({1, 5, 9, d}, 6), v = randn({1, 5, 9, 4}, 7);
  auto y = hd_chunked(q, k, v, lk, {.chunk = 4}).y;
  for (int64_t h = 0; h < 5; ++h) {
    auto one = LayerKernels::from({kernels[h]});
    auto yh = hd_chunked(q.narrow(1, h, 1), k.narrow(1, h, 1), v.narrow(1, h, 1), one, {.chunk = 4}).y;
    EXPECT_LT(rel_err(y.narrow(1, h, 1), yh), 1e-13) << h;
  }
}

// kappa >= eps with an adversarial L (its null direction hits the actual s̄ of every
// pair) and outlier coordinates of 30: the factored form stays >= eps where the
// expanded polynomial cancels catastrophically in fp32.
TEST(QuadraticKernel, FactoredFormStaysPositiveWhereExpandedCancels) {
  const int64_t d = 8, N = 64;
  auto q = randn({1, 1, N, d}, 81, 0.3), k = randn({1, 1, N, d}, 82, 0.3);
  // Outlier coordinates 30 (+1e-3 jitter so that fp32 rounding differs between pairs).
  q.narrow(-1, 6, 2).copy_(30.0 + randn({1, 1, N, 2}, 84, 1e-3));
  k.narrow(-1, 6, 2).copy_(30.0 + randn({1, 1, N, 2}, 85, 1e-3));
  const double so = 900.0 / std::sqrt(8.0);  // s_g of each outlier group
  // s̄ = [1, s_bulk, s_6, s_7]; kappa = eps + (2 so - s_6 - s_7)² + (1e-4 s_bulk)²
  std::vector<std::vector<int64_t>> groups{{0, 1, 2, 3, 4, 5}, {6}, {7}};
  auto L = at::zeros({4, 4}, at::kDouble);
  L[0][0] = 2 * so;
  L[1][1] = 1e-4;
  L[2][0] = -1.0;
  L[3][0] = -1.0;
  const double eps = 1e-6;
  auto lk = LayerKernels::from({QuadraticKernel::from_lower(groups, L, eps)});
  for (auto dt : {at::kDouble, at::kFloat}) {
    auto w = hd_pair_weights(q.to(dt), k.to(dt), lk);
    EXPECT_GE(w.min().item<double>(), eps * (1 - 1e-6)) << c10::toString(dt);
  }
  // fp64 expanded agrees with the factored value to ~1e-16 * (2 so)² ≈ 5e-11 absolute.
  auto w64 = hd_pair_weights(q, k, lk), e64 = hd_pair_weights_expanded(q, k, lk);
  EXPECT_LT((w64 - e64).abs().max().item<double>(), 1e-8);
  EXPECT_LT(w64.max().item<double>(), 1e-2);  // all pairs sit near eps (|z0| <~ 0.05)
  // fp32 expanded: terms of ~4e5 cancel to <~ 1e-3; their rounding (~0.02) swamps it.
  auto e32 = hd_pair_weights_expanded(q.to(at::kFloat), k.to(at::kFloat), lk);
  EXPECT_LT(e32.min().item<double>(), 0.0);
  EXPECT_GT((e32.to(at::kDouble) - w64).abs().max().item<double>(), 1e3 * eps);
  // The pairwise evaluation (factored) stays finite and is a convex combination of v.
  auto v = randn({1, 1, N, 3}, 83);
  auto y = hd_pairwise(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat), lk);
  EXPECT_TRUE(at::isfinite(y).all().item<bool>());
  EXPECT_LE(y.abs().max().item<double>(), v.abs().max().item<double>() * (1 + 1e-5));
}

}  // namespace
}  // namespace oal::attn
