// The chunked LM loss against log_softmax over the full logits in fp64 (an independent
// reference: ATen's ops and autograd, no chunks): loss and d loss / d hidden across chunk
// sizes that do and do not divide the positions, the no-grad path, the incoming
// gradient's scale, and bad input.
#include <gtest/gtest.h>

#include "oal/core/error.h"
#include "oal/train/chunked_nll.h"

namespace {

using oal::train::chunked_nll_sum;

struct Case {
  at::Tensor hidden, head, targets;
};

Case make_case(int64_t M, int64_t H, int64_t V, uint64_t seed) {
  at::manual_seed(seed);
  return {at::randn({M, H}) * 2, at::randn({V, H}) * 0.5, at::randint(V, {M}, at::kLong)};
}

// Loss and gradient of the fp64 reference.
std::pair<double, at::Tensor> reference(const Case& c) {
  at::Tensor h = c.hidden.to(at::kDouble).set_requires_grad(true);
  at::Tensor loss = at::nll_loss(at::log_softmax(at::mm(h, c.head.to(at::kDouble).t()), -1),
                                 c.targets, {}, at::Reduction::Sum);
  loss.backward();
  return {loss.item<double>(), h.grad()};
}

TEST(ChunkedNll, MatchesFullLogSoftmaxAcrossChunks) {
  for (int64_t chunk : {1, 7, 32, 40, 1000}) {
    const Case c = make_case(40, 24, 300, 3);
    const auto [ref_loss, ref_grad] = reference(c);
    at::Tensor h = c.hidden.clone().set_requires_grad(true);
    at::Tensor loss = chunked_nll_sum(h, c.head, c.targets, chunk);
    loss.backward();
    // fp32 logits (|logit| up to ~30) summed over 300 classes and 40 positions: a few
    // fp32 ulps of the per-position log-sum-exp, well under 1e-5 relative.
    EXPECT_NEAR(loss.item<double>(), ref_loss, 1e-5 * std::abs(ref_loss)) << "chunk " << chunk;
    // Each gradient entry is a 300-term fp32 dot product of probabilities (<= 1) with
    // head rows (|w| ~ 0.5): 1e-5 absolute is ~100 ulps of the largest terms.
    EXPECT_TRUE(at::allclose(h.grad().to(at::kDouble), ref_grad, 1e-4, 1e-5)) << "chunk " << chunk;
  }
}

TEST(ChunkedNll, KernelsWithTheTransposedHeadGiveTheSameGradient) {
  const Case c = make_case(70, 32, 500, 4);
  const auto [ref_loss, ref_grad] = reference(c);
  at::Tensor h = c.hidden.clone().set_requires_grad(true);
  at::Tensor loss = chunked_nll_sum(h, c.head, c.targets, 16, c.head.t().contiguous());
  loss.backward();
  // As above (fp32 products of length 32 and 500).
  EXPECT_NEAR(loss.item<double>(), ref_loss, 1e-5 * std::abs(ref_loss));
  EXPECT_TRUE(at::allclose(h.grad().to(at::kDouble), ref_grad, 1e-4, 1e-5));
  EXPECT_THROW(chunked_nll_sum(h, c.head, c.targets, 16, c.head), oal::Error);  // not [H, V]
}

TEST(ChunkedNll, ScalesByTheIncomingGradientAndTakesStridedHidden) {
  const Case c = make_case(33, 16, 50, 5);
  const auto [ref_loss, ref_grad] = reference(c);
  // A transposed view: the loss reads any strides.
  at::Tensor base = c.hidden.t().contiguous().set_requires_grad(true);
  at::Tensor loss = chunked_nll_sum(base.t(), c.head, c.targets, 8);
  (loss * 3.0 / 33.0).backward();
  EXPECT_TRUE(at::allclose(base.grad().t().to(at::kDouble), ref_grad * (3.0 / 33.0), 1e-4, 1e-6));
}

TEST(ChunkedNll, NoGradPathGivesTheSameLoss) {
  const Case c = make_case(20, 8, 64, 7);
  const double ref = reference(c).first;
  at::Tensor a = chunked_nll_sum(c.hidden, c.head, c.targets, 6);  // no requires_grad
  EXPECT_FALSE(a.requires_grad());
  at::Tensor h = c.hidden.clone().set_requires_grad(true);
  at::NoGradGuard no_grad;
  at::Tensor b = chunked_nll_sum(h, c.head, c.targets, 6);  // grad mode off
  EXPECT_FALSE(b.requires_grad());
  EXPECT_NEAR(a.item<double>(), ref, 1e-5 * ref);
  EXPECT_EQ(a.item<float>(), b.item<float>());
}

TEST(ChunkedNll, RejectsBadInput) {
  const Case c = make_case(4, 8, 16, 9);
  auto fails = [](auto&& f, const std::string& what) {
    try {
      f();
    } catch (const oal::Error& e) {
      EXPECT_NE(std::string(e.what()).find("chunked_nll"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "no error for " << what;
  };
  fails([&] { chunked_nll_sum(c.hidden, c.head.clone().set_requires_grad(true), c.targets); },
        "frozen");
  fails([&] { chunked_nll_sum(c.hidden, c.head, c.targets + 16); }, "targets must lie");
  fails([&] { chunked_nll_sum(c.hidden, c.head, c.targets - 1); }, "targets must lie");
  fails([&] { chunked_nll_sum(c.hidden.to(at::kDouble), c.head, c.targets); }, "hidden");
  fails([&] { chunked_nll_sum(c.hidden, c.head.narrow(1, 0, 4), c.targets); }, "head");
  fails([&] { chunked_nll_sum(c.hidden, c.head, c.targets.narrow(0, 0, 3)); }, "targets");
  fails([&] { chunked_nll_sum(c.hidden, c.head, c.targets, 0); }, "chunk");
}

}  // namespace
