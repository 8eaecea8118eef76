// The training kernel of causal softmax attention (softmax_train.h) against the naive
// reference's autograd in fp64 (softmax.h: the full score matrix, ATen's own backward):
// outputs and q/k/v gradients across shapes, GQA groups, block sizes that do and do not
// divide N, N below one block, and large scores; plus the dispatch from SoftmaxAttention.
#include <gtest/gtest.h>

#include "oal/attention/softmax/softmax.h"
#include "oal/attention/softmax/softmax_method.h"
#include "oal/attention/softmax/softmax_train.h"
#include "oal/core/error.h"

namespace {

using namespace oal::attn;

struct Grads {
  at::Tensor y, dq, dk, dv;
};

// y and the gradients of Σ y ∘ w.
template <typename F>
Grads run(F&& attention, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
          const at::Tensor& w, at::ScalarType dtype) {
  at::Tensor qq = q.to(dtype).set_requires_grad(true), kk = k.to(dtype).set_requires_grad(true);
  at::Tensor vv = v.to(dtype).set_requires_grad(true);
  at::Tensor y = attention(qq, kk, vv);
  (y * w.to(dtype)).sum().backward();
  return {y.detach().to(at::kDouble), qq.grad().to(at::kDouble), kk.grad().to(at::kDouble),
          vv.grad().to(at::kDouble)};
}

void expect_close(const Grads& a, const Grads& r, double tol, const std::string& what) {
  // Relative to each tensor's scale: fp32 sums over up to N = 300 keys and D = 64 dims.
  // The scale is at least 0.1: with one key, dq and dk are exactly zero in fp64 and
  // fp32 rounding of dS = P (dP − D) leaves ~1e-7.
  auto close = [&](const at::Tensor& x, const at::Tensor& ref, const char* name) {
    const double scale = std::max(ref.abs().max().item<double>(), 0.1);
    EXPECT_LT((x - ref).abs().max().item<double>() / scale, tol) << what << " " << name;
  };
  close(a.y, r.y, "y");
  close(a.dq, r.dq, "dq");
  close(a.dk, r.dk, "dk");
  close(a.dv, r.dv, "dv");
}

TEST(SoftmaxTrain, MatchesTheNaiveReferenceGradients) {
  struct Shape {
    int64_t B, Hq, Hkv, N, D, Dv, block;
  };
  for (const Shape& c : std::vector<Shape>{{1, 1, 1, 1, 8, 8, 64},
                                           {1, 2, 1, 10, 8, 8, 4},
                                           {2, 4, 2, 33, 16, 12, 8},
                                           {1, 9, 3, 300, 64, 64, 64},
                                           {1, 3, 3, 129, 32, 32, 128}}) {
    at::manual_seed(c.N);
    const at::Tensor q = at::randn({c.B, c.Hq, c.N, c.D}), k = at::randn({c.B, c.Hkv, c.N, c.D});
    const at::Tensor v = at::randn({c.B, c.Hkv, c.N, c.Dv}), w = at::randn({c.B, c.Hq, c.N, c.Dv});
    const double scale = 1.0 / std::sqrt(double(c.D));
    const Grads ref = run([](auto& a, auto& b, auto& d) { return softmax_attention_naive(a, b, d); },
                          q, k, v, w, at::kDouble);
    const Grads got = run([&](auto& a, auto& b, auto& d) {
      return softmax_attention_train(a, b, d, scale, c.block);
    }, q, k, v, w, at::kFloat);
    // fp32 against fp64: a few ulps of each product, amplified by the softmax's
    // exponent (|s| up to ~4 here); 2e-5 of the tensor's largest entry.
    expect_close(got, ref, 2e-5, "N=" + std::to_string(c.N) + " block=" + std::to_string(c.block));
  }
}

TEST(SoftmaxTrain, LargeScoresStayFinite) {
  at::manual_seed(3);
  const at::Tensor q = at::randn({1, 2, 40, 16}) * 30, k = at::randn({1, 1, 40, 16}) * 30;
  const at::Tensor v = at::randn({1, 1, 40, 16}), w = at::randn({1, 2, 40, 16});
  const Grads ref = run([](auto& a, auto& b, auto& d) { return softmax_attention_naive(a, b, d); },
                        q, k, v, w, at::kDouble);
  const Grads got = run([](auto& a, auto& b, auto& d) {
    return softmax_attention_train(a, b, d, 0.25, 16);
  }, q, k, v, w, at::kFloat);
  for (const auto* t : {&got.y, &got.dq, &got.dk, &got.dv}) EXPECT_TRUE(t->isfinite().all().item<bool>());
  // Scores up to ~|900|: the probabilities are nearly one-hot, and fp32 rounding of the
  // scores (~1e-4 absolute) moves them by that much relative.
  expect_close(got, ref, 2e-3, "large scores");
}

TEST(SoftmaxTrain, SoftmaxAttentionTakesItUnderAutogradOnly) {
  at::manual_seed(4);
  const at::Tensor q = at::randn({1, 2, 20, 8}), k = at::randn({1, 1, 20, 8});
  const at::Tensor v = at::randn({1, 1, 20, 8});
  EXPECT_FALSE(softmax_train_ready(q, k, v));  // no autograd: the flash kernel
  at::Tensor qg = q.clone().set_requires_grad(true);
  EXPECT_TRUE(softmax_train_ready(qg, k, v));
  EXPECT_FALSE(softmax_train_ready(qg.to(at::kDouble), k, v));
  EXPECT_FALSE(softmax_train_ready(qg.narrow(2, 0, 10), k, v));  // a decode-style suffix
  SoftmaxAttention method;
  at::Tensor y = method.forward(qg, k, v);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_TRUE(at::allclose(y, softmax_attention_naive(q, k, v), 1e-5, 1e-6));
  EXPECT_THROW(softmax_attention_train(qg, k, v, 0.0), oal::Error);
  EXPECT_THROW(softmax_attention_train(qg, k, v, 0.3, 0), oal::Error);
  EXPECT_THROW(softmax_attention_train(qg, k.narrow(3, 0, 4), v, 0.3), oal::Error);
}

}  // namespace
