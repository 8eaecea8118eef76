// Learning-rate schedule, AdamW wrapper (update rule, state round trip) and grad-norm
// clipping. Expected values are computed by hand from the formulas in the headers.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "oal/core/error.h"
#include "oal/train/optimizer.h"
#include "oal/train/schedule.h"

namespace {

using namespace oal::train;

TEST(LrSchedule, WarmupThenCosine) {
  LrSchedule s{1.0, 100, 0.05};
  EXPECT_EQ(s.warmup_steps(), 5);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.2);
  EXPECT_DOUBLE_EQ(s.lr(4), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(5), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(52), 0.5 * (1 + std::cos(std::numbers::pi * 47.0 / 95.0)));
  EXPECT_DOUBLE_EQ(s.lr(99), 0.5 * (1 + std::cos(std::numbers::pi * 94.0 / 95.0)));
  EXPECT_GT(s.lr(99), 0.0);
  for (int64_t u = 5; u < 99; ++u) EXPECT_GE(s.lr(u), s.lr(u + 1));  // monotone decay
}

TEST(LrSchedule, TinyRunsAndBadInput) {
  EXPECT_EQ((LrSchedule{1.0, 10, 0.05}.warmup_steps()), 1);  // ceil(0.5) = 1
  EXPECT_DOUBLE_EQ((LrSchedule{2.0, 1, 0.05}.lr(0)), 2.0);
  EXPECT_THROW((LrSchedule{1.0, 10, 0.05}.lr(10)), oal::Error);
  EXPECT_THROW((LrSchedule{1.0, 0, 0.05}.validate()), oal::Error);
  EXPECT_THROW((LrSchedule{-1.0, 10, 0.05}.validate()), oal::Error);
}

TEST(AdamW, FirstUpdateMatchesHandComputedRule) {
  // AdamW step 1: p <- p (1 - lr wd); m̂ = g, v̂ = g²; p <- p - lr g / (|g| + eps).
  at::Tensor p = at::ones({1}, at::kDouble).set_requires_grad(true);
  AdamW opt({p}, {0.1, 0.01, 0.9, 0.999, 1e-8});
  p.mutable_grad() = at::full({1}, 0.5, at::kDouble);
  opt.step();
  EXPECT_NEAR(p.item<double>(), 0.999 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-12);
  opt.set_lr(0.25);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.25);
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(AdamW, StateRoundTripContinuesIdentically) {
  auto grads = [](int64_t i) { return at::arange(6, at::kFloat).reshape({2, 3}) * (0.1 * (i + 1)) - 0.2; };
  at::Tensor a = at::zeros({2, 3}).set_requires_grad(true);
  AdamW oa({a});
  for (int64_t i = 0; i < 3; ++i) {
    a.mutable_grad() = grads(i);
    oa.step();
  }
  const std::string saved = oa.save_state();
  at::Tensor b = a.detach().clone().set_requires_grad(true);
  AdamW ob({b});
  ob.load_state(saved);
  a.mutable_grad() = grads(3);
  b.mutable_grad() = grads(3);
  oa.step();
  ob.step();
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_THROW(ob.load_state("not an archive"), oal::Error);
}

TEST(AdamW, RejectsNonTrainableTensors) {
  EXPECT_THROW(AdamW(std::vector<at::Tensor>{at::zeros({2})}), oal::Error);
  EXPECT_THROW(AdamW(std::vector<at::Tensor>{}), oal::Error);
}

TEST(ClipGradNorm, ScalesToMaxNorm) {
  at::Tensor p = at::zeros({2}).set_requires_grad(true);
  at::Tensor q = at::zeros({1}).set_requires_grad(true);
  p.mutable_grad() = at::tensor({3.0f, 0.0f});
  q.mutable_grad() = at::tensor({4.0f});
  EXPECT_NEAR(clip_grad_norm({p, q}, 1.0), 5.0, 1e-6);
  const double c = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(p.grad()[0].item<float>(), 3 * c, 1e-6);
  EXPECT_NEAR(q.grad()[0].item<float>(), 4 * c, 1e-6);
  // Below the limit nothing changes.
  EXPECT_NEAR(clip_grad_norm({p, q}, 10.0), 1.0, 1e-5);
  EXPECT_NEAR(q.grad()[0].item<float>(), 4 * c, 1e-6);
  q.mutable_grad() = at::tensor({NAN});
  EXPECT_THROW(clip_grad_norm({p, q}, 1.0), oal::Error);
}

}  // namespace
