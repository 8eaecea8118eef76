// Training through frozen projections (model/frozen_linear.h) against at::linear's
// autograd in fp64: outputs and input gradients across shapes (decode-sized and
// prefill-sized M, with and without bias, 3-D inputs), LoRA on top, and which
// projections prepare_frozen_projections takes.
#include <gtest/gtest.h>

#include "common/tiny_model.h"
#include "oal/adapt/lora.h"
#include "oal/core/error.h"
#include "oal/model/frozen_linear.h"
#include "oal/model/transformer.h"

namespace {

using namespace oal;

model::Linear frozen(int64_t out, int64_t in, bool bias) {
  model::Linear l;
  l.weight = at::randn({out, in}) / std::sqrt(double(in));
  if (bias) l.bias = at::randn({out});
  l.weight_t = l.weight.t().contiguous();
  return l;
}

TEST(FrozenLinear, MatchesAtLinearAutogradAcrossShapes) {
  at::manual_seed(1);
  for (const auto& [M, in, out, bias] : std::vector<std::tuple<int64_t, int64_t, int64_t, bool>>{
           {1, 16, 24, false}, {7, 64, 40, true}, {100, 96, 200, false}, {257, 576, 192, true}}) {
    const model::Linear l = frozen(out, in, bias);
    at::Tensor x = at::randn({M, in}).set_requires_grad(true);
    at::Tensor y = l.forward(x);
    const at::Tensor dy = at::randn({M, out});
    (y * dy).sum().backward();
    at::Tensor xr = x.detach().to(at::kDouble).set_requires_grad(true);
    at::Tensor yr = bias ? at::linear(xr, l.weight.to(at::kDouble), l.bias.to(at::kDouble))
                         : at::linear(xr, l.weight.to(at::kDouble));
    (yr * dy.to(at::kDouble)).sum().backward();
    // fp32 dot products of length in / out (<= 576) of O(1) terms: relative error ~1e-6,
    // 1e-4 absolute leaves room for the kernels' summation order.
    EXPECT_TRUE(at::allclose(y.to(at::kDouble), yr, 1e-4, 1e-4)) << M << "x" << in << "x" << out;
    EXPECT_TRUE(at::allclose(x.grad().to(at::kDouble), xr.grad(), 1e-4, 1e-4))
        << M << "x" << in << "x" << out;
  }
}

TEST(FrozenLinear, ThreeDimensionalInputAndLoraOnTop) {
  at::manual_seed(2);
  model::Linear l = frozen(12, 20, false);
  auto delta =
      std::make_shared<adapt::LoraDelta>(20, 12, adapt::LoraConfig{4, 8, 0.0}, 3, at::kCPU);
  {
    at::NoGradGuard g;
    delta->b.normal_(0, 0.2);
  }
  l.delta = delta;
  at::Tensor x = at::randn({2, 5, 20}).set_requires_grad(true);
  l.forward(x).pow(2).sum().backward();
  // The same through at::linear: the plain path (no Wᵀ).
  model::Linear plain = l;
  plain.weight_t = at::Tensor();
  at::Tensor x2 = x.detach().clone().set_requires_grad(true);
  const at::Tensor a_grad = delta->a.grad().clone();
  delta->a.mutable_grad().zero_();
  delta->b.mutable_grad().zero_();
  plain.forward(x2).pow(2).sum().backward();
  EXPECT_TRUE(at::allclose(x.grad(), x2.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(at::allclose(a_grad, delta->a.grad(), 1e-4, 1e-5));  // LoRA still trains
}

TEST(FrozenLinear, NotTakenWithoutAutogradOrWithoutTheTranspose) {
  model::Linear l = frozen(8, 8, false);
  EXPECT_FALSE(model::frozen_linear_ready(l, at::randn({2, 8})));  // no autograd: inference path
  EXPECT_TRUE(model::frozen_linear_ready(l, at::randn({2, 8}).set_requires_grad(true)));
  EXPECT_FALSE(model::frozen_linear_ready(l, at::randn({2, 8}, at::kDouble).set_requires_grad(true)));
  l.weight_t = at::Tensor();
  EXPECT_FALSE(model::frozen_linear_ready(l, at::randn({2, 8}).set_requires_grad(true)));
  EXPECT_THROW(model::frozen_linear(at::randn({2, 8}).set_requires_grad(true), l), Error);
}

TEST(FrozenLinear, PreparesEveryDenseProjectionOfAModelAndKeepsItsGradients) {
  const auto w = test::tiny_weights(7, 2);
  model::Transformer plain(w), fast(w);
  EXPECT_EQ(model::prepare_frozen_projections(fast), 2 * 7);
  auto lp = adapt::LoraAdapters::attach(plain, {4, 8, 0.0}, 5);
  auto lf = adapt::LoraAdapters::attach(fast, {4, 8, 0.0}, 5);
  {
    at::NoGradGuard g;
    for (auto* l : {&lp, &lf})
      for (auto& [n, t] : l->named_tensors())
        if (n.find("lora_B") != std::string::npos) t.fill_(0.05);
  }
  const at::Tensor tokens = test::tiny_blocks(1, 12, 3);
  plain.forward(tokens).logsumexp(-1).sum().backward();
  fast.forward(tokens).logsumexp(-1).sum().backward();
  const auto pp = lp.parameters(), pf = lf.parameters();
  for (size_t i = 0; i < pp.size(); ++i)
    EXPECT_TRUE(at::allclose(pp[i].grad(), pf[i].grad(), 1e-4, 1e-5)) << i;
}

}  // namespace
