// Generation: the stories260K greedy reference, KV-cache decoding against full
// recomputation, the sampler, and bad input.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>

#include "common/shared_data.h"
#include "common/tiny_model.h"
#include "oal/core/error.h"
#include "oal/formats/load.h"
#include "oal/generate/decode_session.h"
#include "oal/generate/generate.h"
#include "oal/generate/sampler.h"
#include "oal/model/transformer.h"
#include "oal/text/tokenizer.h"

using namespace oal::model;

using namespace oal::formats;
using namespace oal::fixtures;

using namespace oal::generate;

namespace {

// The shared data README's reference (independent float64 implementation).
const char* const k_reference =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park. One day, she saw a big, red ball. She wanted to play with it, but it was too "
    "high.\nLily";

// Logits of the cache path at each step vs the full forward of the same prefix: both
// fp32, differing only in summation order (tiled vs cached attention), so 1e-4 absolute
// on O(1..10) logits is ~1000x the expected rounding difference.
constexpr double k_cache_tol = 1e-4;

void expect_cache_matches_full(const Transformer& model, const at::Tensor& tokens,
                               const std::vector<int64_t>& chunks) {
  const at::Tensor full = model.forward(tokens);  // [B, T, V]
  DecodeSession session(model, tokens.size(0));
  int64_t pos = 0;
  for (int64_t len : chunks) {
    const at::Tensor got = session.extend(tokens.narrow(1, pos, len));
    const at::Tensor want = full.narrow(1, pos, len);
    EXPECT_TRUE(at::allclose(got, want, k_cache_tol, k_cache_tol))
        << "chunk at " << pos << " max |diff| " << (got - want).abs().max().item<double>();
    pos += len;
    EXPECT_EQ(session.position(), pos);
  }
  EXPECT_EQ(pos, tokens.size(1));
  EXPECT_GT(session.state_bytes(), 0);
}

}  // namespace

TEST(Generate, Stories260kGreedyMatchesReference) {
  auto model_path = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  auto tok_path = OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const Transformer model(load_model(model_path.string()));
  const auto tok = oal::text::load_tokenizer(tok_path);
  const std::vector<int32_t> prompt = tok->encode("Once upon a time", true);
  ASSERT_EQ(prompt.front(), 1);  // BOS
  GenerateOptions o;
  o.max_new_tokens = 60;
  const GenerateResult r = generate(model, prompt, o);
  ASSERT_EQ(r.tokens.size(), 60u);
  EXPECT_FALSE(r.stopped);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), r.tokens.begin(), r.tokens.end());
  EXPECT_EQ(tok->decode(all), k_reference);
}

TEST(Generate, Stories260kKvCacheEqualsFullRecomputation) {
  auto model_path = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const Transformer model(load_model(model_path.string()));
  const at::Tensor tokens = oal::test::test_tokens(2, 40, model.config().vocab_size, 7);
  expect_cache_matches_full(model, tokens, {9, 1, 1, 1, 5, 1, 22});
}

TEST(Generate, SyntheticQwen2KvCacheEqualsFullRecomputation) {
  SyntheticOptions o;
  o.architecture = SyntheticArch::qwen2;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.planted_scale = 4.0;
  const Transformer model(oal::test::synthetic_checkpoint(o, "cache"));
  const at::Tensor tokens = oal::test::test_tokens(3, 33, model.config().vocab_size, 3);
  std::vector<int64_t> steps(33, 1);  // token by token from the first
  expect_cache_matches_full(model, tokens, steps);
  expect_cache_matches_full(model, tokens, {16, 17});
}

TEST(Generate, GreedyEqualsArgmaxOfFullForwardEachStep) {
  SyntheticOptions o;
  o.planted_scale = 2.0;
  const Transformer model(oal::test::synthetic_checkpoint(o, "greedy"));
  const std::vector<int32_t> prompt = {5, 17, 3};
  GenerateOptions g;
  g.max_new_tokens = 12;
  std::vector<int32_t> streamed;
  const auto r = generate(model, prompt, g, [&](int32_t id) { streamed.push_back(id); });
  EXPECT_EQ(streamed, r.tokens);
  std::vector<int64_t> seq(prompt.begin(), prompt.end());
  for (int32_t next : r.tokens) {
    const at::Tensor logits = model.forward(at::tensor(seq, at::kLong).unsqueeze(0));
    EXPECT_EQ(logits[0][-1].argmax().item<int64_t>(), next);
    seq.push_back(next);
  }
}

TEST(Generate, StopsAtStopToken) {
  SyntheticOptions o;
  const Transformer model(oal::test::synthetic_checkpoint(o, "stop"));
  GenerateOptions g;
  g.max_new_tokens = 10;
  const auto free_run = generate(model, {1, 2, 3}, g);
  g.stop_tokens = {free_run.tokens[2]};
  const auto stopped = generate(model, {1, 2, 3}, g);
  EXPECT_TRUE(stopped.stopped);
  // Ends at the first occurrence of the stop token, which it includes.
  const auto first = std::find(free_run.tokens.begin(), free_run.tokens.end(), g.stop_tokens[0]);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(free_run.tokens.begin(), first + 1));
}

TEST(Generate, RejectsBadInput) {
  SyntheticOptions o;
  o.max_position_embeddings = 16;
  const Transformer model(oal::test::synthetic_checkpoint(o, "bad"));
  GenerateOptions g;
  g.max_new_tokens = 4;
  EXPECT_THROW(generate(model, {}, g), oal::Error);                           // empty prompt
  EXPECT_THROW(generate(model, std::vector<int32_t>(13, 1), g), oal::Error);  // 13 + 4 > 16
  EXPECT_NO_THROW(generate(model, std::vector<int32_t>(12, 1), g));
  g.max_new_tokens = -1;
  EXPECT_THROW(generate(model, {1}, g), oal::Error);
  g.max_new_tokens = 2;
  g.sampler.top_p = 0;
  EXPECT_THROW(generate(model, {1}, g), oal::Error);
}

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  Sampler s({});
  EXPECT_EQ(s.sample(at::tensor({0.1, 2.0, -1.0, 2.0})), 1);
  EXPECT_EQ(s.sample(at::tensor({3.0f})), 0);
}

// The fp32 greedy pass against the reference (argmax of distribution()'s one-hot), over
// random rows with planted ties and extremes; it must pick the same id exactly (no
// tolerance: both compare the same fp32 values).
TEST(Sampler, GreedyFastPathEqualsTheReference) {
  Sampler s({});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  for (int64_t trial = 0; trial < 200; ++trial) {
    const int64_t V = 1 + trial * 37 % 500;
    at::Tensor l = at::randn({V}, gen) * (trial % 3 == 0 ? 1e4 : 3.0);
    if (trial % 4 == 1 && V > 3) l[V - 1] = l[1] = l.max() + 1;  // a tie: id 1 must win
    if (trial % 5 == 2) l.fill_(-3.0e38f);                       // all equal and huge
    const int64_t want = s.distribution(l).argmax().item<int64_t>();
    EXPECT_EQ(s.sample(l), want) << "trial " << trial;
    EXPECT_EQ(s.sample(l.to(at::kDouble)), want) << "trial " << trial;  // the reference path
  }
  // Non-contiguous rows take the reference path and agree.
  at::Tensor wide = at::randn({8, 2}, gen);
  EXPECT_EQ(s.sample(wide.select(1, 0)), s.distribution(wide.select(1, 0)).argmax().item<int64_t>());
  EXPECT_THROW(s.sample(at::tensor({1.0f, NAN})), oal::Error);
  EXPECT_THROW(s.sample(at::tensor({INFINITY, 1.0f})), oal::Error);
}

TEST(Sampler, TemperatureAndTopPDistribution) {
  const at::Tensor logits = at::log(at::tensor({0.5, 0.3, 0.15, 0.05}, at::kDouble));
  // Temperature 1, no nucleus: the softmax itself.
  at::Tensor p = Sampler({.temperature = 1.0}).distribution(logits);
  EXPECT_TRUE(at::allclose(p, at::tensor({0.5, 0.3, 0.15, 0.05}, at::kDouble), 0, 1e-12));
  // Temperature 2: p ∝ sqrt(p).
  at::Tensor r = at::sqrt(at::tensor({0.5, 0.3, 0.15, 0.05}, at::kDouble));
  p = Sampler({.temperature = 2.0}).distribution(logits);
  EXPECT_TRUE(at::allclose(p, r / r.sum(), 0, 1e-12));
  // top_p 0.7: 0.5 alone is short of 0.7, 0.5 + 0.3 reaches it → {0, 1} renormalised.
  p = Sampler({.temperature = 1.0, .top_p = 0.7}).distribution(logits);
  EXPECT_TRUE(at::allclose(p, at::tensor({0.625, 0.375, 0.0, 0.0}, at::kDouble), 0, 1e-12));
  // top_p 0.5 keeps only the first (its mass already reaches 0.5).
  p = Sampler({.temperature = 1.0, .top_p = 0.5}).distribution(logits);
  EXPECT_TRUE(at::allclose(p, at::tensor({1.0, 0.0, 0.0, 0.0}, at::kDouble), 0, 1e-12));
}

TEST(Sampler, TopKThenTopP) {
  // Ids out of probability order, so that the kept set must come from the sort.
  const at::Tensor logits = at::log(at::tensor({0.15, 0.5, 0.05, 0.3}, at::kDouble));
  // top_k 2 keeps {1, 3} (0.5, 0.3) renormalised: 0.625, 0.375.
  at::Tensor p = Sampler({.temperature = 1.0, .top_k = 2}).distribution(logits);
  EXPECT_TRUE(at::allclose(p, at::tensor({0.0, 0.625, 0.0, 0.375}, at::kDouble), 0, 1e-12));
  // top_k 3 then top_p 0.6 over the kept mass 0.95: 0.5/0.95 = 0.526 < 0.6, so token 3
  // (mass before it 0.526) stays and token 0 (before it 0.842) goes.
  p = Sampler({.temperature = 1.0, .top_p = 0.6, .top_k = 3}).distribution(logits);
  EXPECT_TRUE(at::allclose(p, at::tensor({0.0, 0.625, 0.0, 0.375}, at::kDouble), 0, 1e-12));
  // top_k 1 is greedy whatever the temperature; top_k >= V keeps everything.
  p = Sampler({.temperature = 5.0, .top_k = 1}).distribution(logits);
  EXPECT_TRUE(at::allclose(p, at::tensor({0.0, 1.0, 0.0, 0.0}, at::kDouble), 0, 1e-12));
  p = Sampler({.temperature = 1.0, .top_k = 9}).distribution(logits);
  EXPECT_TRUE(at::allclose(p, at::tensor({0.15, 0.5, 0.05, 0.3}, at::kDouble), 0, 1e-12));
  EXPECT_THROW(Sampler({.top_k = -1}), oal::Error);
}

TEST(Sampler, SeededDrawsFollowTheDistributionAndRepeat) {
  const at::Tensor logits = at::log(at::tensor({0.5, 0.3, 0.15, 0.05}, at::kDouble));
  Sampler a({.temperature = 1.0, .seed = 42}), b({.temperature = 1.0, .seed = 42}),
      c({.temperature = 1.0, .seed = 43});
  const int n = 20000;
  std::vector<int> counts(4, 0);
  int same = 0, differ = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t x = a.sample(logits);
    counts[x]++;
    same += x == b.sample(logits);
    differ += x != c.sample(logits);
  }
  EXPECT_EQ(same, n);
  EXPECT_GT(differ, n / 4);
  const double p[4] = {0.5, 0.3, 0.15, 0.05};
  for (int i = 0; i < 4; ++i) {
    // Binomial count: 4 standard deviations is a 6e-5 false-failure chance per token.
    const double sd = std::sqrt(n * p[i] * (1 - p[i]));
    EXPECT_NEAR(counts[i], n * p[i], 4 * sd) << "token " << i;
  }
}

TEST(Sampler, RejectsBadOptionsAndLogits) {
  EXPECT_THROW(Sampler({.temperature = -1.0}), oal::Error);
  EXPECT_THROW(Sampler({.temperature = NAN}), oal::Error);
  EXPECT_THROW(Sampler({.top_p = 1.5}), oal::Error);
  Sampler s({.temperature = 1.0});
  EXPECT_THROW(s.sample(at::tensor({1.0, NAN})), oal::Error);
  EXPECT_THROW(s.sample(at::zeros({0})), oal::Error);
  EXPECT_THROW(s.sample(at::zeros({2, 2})), oal::Error);
}
