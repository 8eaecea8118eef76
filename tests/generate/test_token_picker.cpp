// TokenPicker: the per-sequence rule of both decode loops (generate/token_picker.h).
#include "oal/generate/token_picker.h"

#include <gtest/gtest.h>

namespace oal::generate {
namespace {

// Greedy logits whose argmax is `id` among 8 tokens.
at::Tensor peak_at(int64_t id) {
  at::Tensor l = at::zeros({8}, at::kFloat);
  l[id] = 5.0f;
  return l;
}

TEST(TokenPicker, StopTokenEndsWithStopAndIsPicked) {
  TokenPicker p({}, {3, 6}, /*max_new_tokens=*/10, /*context=*/0);
  EXPECT_EQ(p.pick(peak_at(2), 4).end, EndReason::none);
  const TokenPicker::Pick last = p.pick(peak_at(6), 5);
  EXPECT_EQ(last.token, 6);
  EXPECT_EQ(last.end, EndReason::stop);
  EXPECT_EQ(p.picked(), 2);
}

TEST(TokenPicker, MaxNewTokensEndsWithLengthOnTheLastOne) {
  TokenPicker p({}, {}, 3, 0);
  EXPECT_EQ(p.pick(peak_at(1), 1).end, EndReason::none);
  EXPECT_EQ(p.pick(peak_at(1), 2).end, EndReason::none);
  EXPECT_EQ(p.pick(peak_at(1), 3).end, EndReason::length);
  // A stop token on the last allowed pick says stop (it is the reason the text ends).
  TokenPicker q({}, {1}, 1, 0);
  EXPECT_EQ(q.pick(peak_at(1), 1).end, EndReason::stop);
}

TEST(TokenPicker, FullContextEndsWithLength) {
  TokenPicker p({}, {}, 100, /*context=*/16);
  // 15 tokens held: the new one can be fed at position 15, the last of 16.
  EXPECT_EQ(p.pick(peak_at(4), 15).end, EndReason::none);
  EXPECT_EQ(p.pick(peak_at(4), 16).end, EndReason::length);
  TokenPicker unbounded({}, {}, 100, /*context=*/0);
  EXPECT_EQ(unbounded.pick(peak_at(4), 1 << 20).end, EndReason::none);
}

TEST(TokenPicker, SamplesWithTheSeededSampler) {
  // The picker draws from the Sampler it was given: the same seed, the same tokens.
  const SamplerOptions o{.temperature = 1.0, .top_p = 1.0, .top_k = 0, .seed = 11};
  TokenPicker p(o, {}, 50, 0);
  Sampler s(o);
  const at::Tensor logits = at::linspace(0, 1, 8);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(p.pick(logits, i).token, s.sample(logits));
}

TEST(FitsContext, PromptPlusNewTokensWithinPositions) {
  EXPECT_TRUE(fits_context(10, 6, 16));
  EXPECT_FALSE(fits_context(10, 7, 16));
  EXPECT_TRUE(fits_context(1 << 20, 1 << 20, 0));  // no stated limit
}

}  // namespace
}  // namespace oal::generate
