// The training kernel of the kernel-attention layers (attention/kernel_train.h): its
// output and every gradient (q, k, v, L, c_h) against LibTorch autograd of the fp64
// pairwise reference (windowed_reference.h), across shapes, GQA, windows (plain, sinks
// only, recent only, both, wider than the sequence), with and without a kernel; large
// scores; the dispatch from the layers under autograd; and refusals.
#include <gtest/gtest.h>

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>

#include <cmath>
#include <memory>
#include <vector>

#include "oal/attention/kernel_train.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/attention/windowed/windowed_reference.h"
#include "oal/core/error.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

struct Case {
  int64_t batch, hq, hkv, T, d, dv;
};

const std::vector<Case> k_cases = {{1, 2, 2, 1, 8, 8},   {2, 4, 2, 37, 8, 5},
                                   {1, 7, 1, 130, 16, 16}, {1, 2, 1, 200, 64, 64}};
// Plain (S = W = 0), sinks only, recent only, both with edges inside and across the
// 64-row blocks, and S + W >= T (then exactly softmax).
const std::vector<Window> k_windows = {{0, 0}, {4, 0}, {0, 1}, {1, 3}, {4, 16}, {4, 64}, {2, 300}};

struct Grads {
  at::Tensor y, dq, dk, dv, dL, dc;
};

// The kernel's output and gradients for a fixed output weighting (fp32 inputs; L and c in
// `param_dtype`), or the reference's (fp64 everywhere) when `reference`.
Grads run(const Case& cs, const Window& w, bool with_kernel, at::ScalarType param_dtype,
          bool reference, uint64_t seed) {
  const at::ScalarType in = reference ? at::kDouble : at::kFloat;
  // Drawn in fp64, then rounded: the kernel and the reference see the same numbers.
  auto leaf = [](at::Tensor t, at::ScalarType dt) { return t.to(dt).set_requires_grad(true); };
  at::Tensor q = leaf(randn({cs.batch, cs.hq, cs.T, cs.d}, seed), in);
  at::Tensor k = leaf(randn({cs.batch, cs.hkv, cs.T, cs.d}, seed + 1), in);
  at::Tensor v = leaf(randn({cs.batch, cs.hkv, cs.T, cs.dv}, seed + 2), in);
  at::Tensor c = leaf(randn({cs.hq}, seed + 3), reference ? at::kDouble : param_dtype);
  LayerKernels lk = LayerKernels::from(oal::test::random_kernels(cs.hq, cs.d, 3, seed + 4),
                                       reference ? at::kDouble : param_dtype);
  lk.L.set_requires_grad(true);
  const at::Tensor out_w = randn({cs.batch, cs.hq, cs.T, cs.dv}, seed + 5);
  at::Tensor y;
  if (reference) {
    at::Tensor kappa = with_kernel ? oal::test::kappa_from(q, k, lk) : at::Tensor();
    y = windowed_pairwise(q, k, v, kappa, c, w);
  } else {
    y = kernel_attention_train(q, k, v, with_kernel ? &lk : nullptr, c, w);
  }
  (y.to(at::kDouble) * out_w).sum().backward();
  Grads g{y.detach(), q.grad(), k.grad(), v.grad(), with_kernel ? lk.L.grad() : at::Tensor(), c.grad()};
  return g;
}

// fp32 kernel against the fp64 reference: every weight and sum is formed in fp32 (~6e-8
// relative rounding per operation) over up to 200 keys and a 64-wide dot product, and
// the gradients chain three such stages; 2e-4 relative (Frobenius) bounds that with
// margin while any wrong term (a mask off by one key, a missing factor 2) is >= 1e-2.
constexpr double k_tol = 2e-4;

TEST(KernelTrain, OutputAndGradientsMatchPairwiseReference) {
  uint64_t seed = 100;
  for (const Case& cs : k_cases)
    for (const Window& w : k_windows)
      for (bool with_kernel : {true, false}) {
        if (!with_kernel && w.recent == 0) continue;  // windowed-only needs W >= 1
        seed += 10;
        const Grads a = run(cs, w, with_kernel, at::kFloat, false, seed);
        const Grads r = run(cs, w, with_kernel, at::kFloat, true, seed);
        const std::string where = "T=" + std::to_string(cs.T) + " d=" + std::to_string(cs.d) +
                                  " Hq/Hkv=" + std::to_string(cs.hq) + "/" + std::to_string(cs.hkv) +
                                  " " + w.describe() + (with_kernel ? " kernel" : " window-only");
        EXPECT_LT(rel_err(a.y, r.y), k_tol) << "y " << where;
        EXPECT_LT(rel_err(a.dq, r.dq), k_tol) << "dq " << where;
        EXPECT_LT(rel_err(a.dk, r.dk), k_tol) << "dk " << where;
        EXPECT_LT(rel_err(a.dv, r.dv), k_tol) << "dv " << where;
        if (with_kernel) {
          ASSERT_TRUE(a.dL.defined() && r.dL.defined()) << where;
          EXPECT_LT(rel_err(a.dL, r.dL), k_tol) << "dL " << where;
        }
        // c_h has no effect without exact keys or without kernel keys (it cancels); the
        // windowed-only method does not read it at all.
        if (!with_kernel)
          EXPECT_FALSE(a.dc.defined() && a.dc.abs().max().item<double>() > 0) << "dc " << where;
        else if (r.dc.abs().max().item<double>() > 1e-12)
          EXPECT_LT(rel_err(a.dc, r.dc), k_tol) << "dc " << where;
        else
          EXPECT_LT(a.dc.abs().max().item<double>(), 1e-5) << "dc " << where;
      }
}

TEST(KernelTrain, GradientsComeBackInTheParametersDtype) {
  const Case cs{1, 4, 2, 40, 8, 8};
  const Grads a = run(cs, {2, 8}, true, at::kDouble, false, 7);
  EXPECT_EQ(a.dL.scalar_type(), at::kDouble);
  EXPECT_EQ(a.dc.scalar_type(), at::kDouble);
  EXPECT_EQ(a.dq.scalar_type(), at::kFloat);
  const Grads r = run(cs, {2, 8}, true, at::kDouble, true, 7);
  EXPECT_LT(rel_err(a.dL, r.dL), k_tol);
}

// Scores near 1e4 in magnitude: each row's weights are shifted by its largest exact
// score, so nothing overflows in the forward or the backward.
TEST(KernelTrain, LargeScoresStayFinite) {
  at::Tensor q = (randn({1, 2, 70, 8}, 1, 1.0, at::kFloat) * 120).set_requires_grad(true);
  at::Tensor k = (randn({1, 2, 70, 8}, 2, 1.0, at::kFloat) * 120).set_requires_grad(true);
  at::Tensor v = randn({1, 2, 70, 8}, 3, 1.0, at::kFloat).set_requires_grad(true);
  LayerKernels lk = LayerKernels::from(oal::test::random_kernels(2, 8, 2, 4), at::kFloat);
  lk.L.set_requires_grad(true);
  at::Tensor c = at::zeros({2}, at::kFloat).set_requires_grad(true);
  ASSERT_GT((at::matmul(q, k.transpose(-1, -2)) / std::sqrt(8.0)).abs().max().item<double>(), 5e3);
  for (const Window& w : {Window{4, 16}, Window{0, 0}}) {
    at::Tensor y = kernel_attention_train(q, k, v, &lk, c, w);
    y.sum().backward();
    EXPECT_TRUE(at::isfinite(y).all().item<bool>()) << w.describe();
    for (const at::Tensor& g : {q.grad(), k.grad(), v.grad(), lk.L.grad(), c.grad()})
      EXPECT_TRUE(at::isfinite(g).all().item<bool>()) << w.describe();
    for (at::Tensor t : {q, k, v, lk.L, c}) t.mutable_grad().zero_();
  }
}

// The layers take the kernel under autograd and give the same values as their
// inference path (the linear-time chunked / decode code).
TEST(KernelTrain, LayersDispatchToItUnderAutograd) {
  auto base = std::make_shared<QuadraticAttention>(QuadraticAttention::from_kernels(
      oal::test::random_kernels(4, 16, 3, 5), {.chunk = 16}, /*trainable=*/true, at::kFloat));
  WindowedAttention windowed(base, {4, 16}, randn({4}, 6), /*trainable=*/true);
  // q records a graph, as the projections' outputs do in training.
  const at::Tensor q = randn({1, 4, 90, 16}, 7, 1.0, at::kFloat).set_requires_grad(true);
  const at::Tensor k = randn({1, 2, 90, 16}, 8, 1.0, at::kFloat);
  const at::Tensor v = randn({1, 2, 90, 16}, 9, 1.0, at::kFloat);
  // The windowed-only method keeps a one-value c_h (it cancels).
  WindowedAttention window_only(nullptr, {2, 8}, at::zeros({1}), /*trainable=*/true);
  for (const AttentionMethod* m : {static_cast<const AttentionMethod*>(base.get()),
                                   static_cast<const AttentionMethod*>(&windowed),
                                   static_cast<const AttentionMethod*>(&window_only)}) {
    const at::Tensor trained = m->forward(q, k, v);
    ASSERT_TRUE(trained.requires_grad()) << m->name();
    EXPECT_NE(trained.grad_fn()->name().find("KernelTrain"), std::string::npos)
        << m->name() << ": " << trained.grad_fn()->name();
    c10::NoGradGuard g;
    // fp32 both ways, different summation orders (chunked state vs pairwise blocks).
    EXPECT_LT(rel_err(trained, m->forward(q, k, v)), 1e-4) << m->name();
  }
}

TEST(KernelTrain, ReadinessAndRefusals) {
  LayerKernels lk = LayerKernels::from(oal::test::random_kernels(2, 8, 2, 4), at::kFloat);
  const at::Tensor q = randn({1, 2, 10, 8}, 1, 1.0, at::kFloat).set_requires_grad(true);
  const at::Tensor k = randn({1, 2, 10, 8}, 2, 1.0, at::kFloat);
  const at::Tensor v = randn({1, 2, 10, 8}, 3, 1.0, at::kFloat);
  const at::Tensor c = at::zeros({2}, at::kFloat);
  EXPECT_TRUE(kernel_train_ready(q, k, v, &lk, c));
  EXPECT_FALSE(kernel_train_ready(q.detach(), k, v, &lk, c));  // nothing records a graph
  EXPECT_FALSE(kernel_train_ready(q.to(at::kDouble), k, v, &lk, c));
  {
    c10::NoGradGuard g;
    EXPECT_FALSE(kernel_train_ready(q, k, v, &lk, c));
  }
  EXPECT_THROW(kernel_attention_train(q, k, v, &lk, at::zeros({3}, at::kFloat), {1, 2}), Error);
  EXPECT_THROW(kernel_attention_train(q, k, v, nullptr, c, {4, 0}), Error);  // no key at all
  EXPECT_THROW(kernel_attention_train(q, k.narrow(2, 0, 5), v.narrow(2, 0, 5), &lk, c, {1, 2}), Error);
  EXPECT_THROW(kernel_attention_train(q.to(at::kDouble), k, v, &lk, c, {1, 2}), Error);
  at::Tensor bad = q.detach().clone();
  bad[0][0][3][1] = std::nan("");
  EXPECT_THROW(kernel_attention_train(bad.set_requires_grad(true), k, v, &lk, c, {1, 2}), Error);
}

}  // namespace
}  // namespace oal::attn
