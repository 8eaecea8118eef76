// The chunked HD prefill is differentiable: autograd gradients w.r.t. q, k, v, L and the
// initial state match central finite differences (fp64).
#include <gtest/gtest.h>

#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;

// Central differences on every entry of `x` (in place, restored) of loss().
at::Tensor finite_diff(at::Tensor x, const std::function<double()>& loss, double h) {
  auto g = at::zeros_like(x);
  auto flat = x.view(-1);
  auto gflat = g.view(-1);
  for (int64_t i = 0; i < flat.numel(); ++i) {
    double x0 = flat[i].item<double>();
    flat[i] = x0 + h;
    double up = loss();
    flat[i] = x0 - h;
    double down = loss();
    flat[i] = x0;
    gflat[i] = (up - down) / (2 * h);
  }
  return g;
}

// Central differences have O(h²) truncation (~1e-10 relative at h = 1e-5) and
// O(1e-16 / h) rounding (~1e-11); 1e-6 relative separates a correct gradient from any
// wrong one by orders of magnitude.
constexpr double k_fd_tol = 1e-6;

double max_rel(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-12);
}

TEST(HdGradient, ChunkedMatchesFiniteDifferences) {
  const int64_t B = 1, Hq = 4, Hkv = 2, T = 11, d = 6, dv = 3;
  auto lk = LayerKernels::from(oal::test::random_kernels(Hq, d, 3, 91));
  auto q = randn({B, Hq, T, d}, 92), k = randn({B, Hkv, T, d}, 93), v = randn({B, Hkv, T, dv}, 94);
  auto w = randn({B, Hq, T, dv}, 95);
  // An initial state from a short prefix, so the inter-chunk readout is exercised too.
  auto init = hd_chunked(randn({B, Hq, 5, d}, 96), randn({B, Hkv, 5, d}, 97),
                         randn({B, Hkv, 5, dv}, 98), lk, {.chunk = 4}).state;
  auto L = lk.L.clone();
  auto S0 = init.S.clone();
  auto eval = [&](const at::Tensor& qq, const at::Tensor& kk, const at::Tensor& vv,
                  const at::Tensor& LL, const at::Tensor& SS) {
    LayerKernels kk_l = lk;
    kk_l.L = LL;
    HdState st{SS, init.tokens};
    return (hd_chunked(qq, kk, vv, kk_l, {.chunk = 4}, &st).y * w).sum();
  };
  // autograd
  auto qg = q.clone().set_requires_grad(true), kg = k.clone().set_requires_grad(true);
  auto vg = v.clone().set_requires_grad(true), Lg = L.clone().set_requires_grad(true);
  auto Sg = S0.clone().set_requires_grad(true);
  eval(qg, kg, vg, Lg, Sg).backward();
  auto loss = [&] { return eval(q, k, v, L, S0).item<double>(); };
  const double h = 1e-5;
  EXPECT_LT(max_rel(qg.grad(), finite_diff(q, loss, h)), k_fd_tol);
  EXPECT_LT(max_rel(kg.grad(), finite_diff(k, loss, h)), k_fd_tol);
  EXPECT_LT(max_rel(vg.grad(), finite_diff(v, loss, h)), k_fd_tol);
  auto gL = finite_diff(L, loss, h);
  EXPECT_LT(max_rel(Lg.grad(), gL), k_fd_tol);
  // Entries above the diagonal are not part of L: zero gradient.
  EXPECT_EQ(at::triu(Lg.grad(), 1).abs().max().item<double>(), 0.0);
  EXPECT_GT(gL.abs().max().item<double>(), 1e-3);  // the test sees a real gradient
  // The state: a few of its entries (all of them would take too long).
  auto Ssub = S0.narrow(1, 1, 1).narrow(2, 0, 8);  // contiguous block of KV head 1
  ASSERT_TRUE(Ssub.is_contiguous());
  EXPECT_LT(max_rel(Sg.grad().narrow(1, 1, 1).narrow(2, 0, 8), finite_diff(Ssub, loss, h)),
            k_fd_tol);
}

TEST(HdGradient, QuadraticAttentionTrainsL) {
  auto m = QuadraticAttention::from_kernels(oal::test::random_kernels(2, 4, 2, 7), {},
                                            /*trainable=*/true);
  ASSERT_EQ(m.parameters().size(), 1u);
  EXPECT_TRUE(m.parameters()[0].requires_grad());
  auto q = randn({1, 2, 9, 4}, 1), k = randn({1, 1, 9, 4}, 2), v = randn({1, 1, 9, 2}, 3);
  m.forward(q, k, v).square().sum().backward();
  auto g = m.parameters()[0].grad();
  ASSERT_TRUE(g.defined());
  EXPECT_GT(g.abs().max().item<double>(), 0.0);
  EXPECT_TRUE(at::isfinite(g).all().item<bool>());
}

}  // namespace
}  // namespace oal::attn
