// Perplexity protocol (App. F.3) against an independent computation, the stories260K
// reference, and bad input.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "common/shared_data.h"
#include "common/tiny_model.h"
#include "model/reference_forward.h"
#include "oal/core/error.h"
#include "oal/eval/perplexity.h"
#include "oal/formats/load.h"
#include "oal/model/transformer.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"

using namespace oal::model;

using namespace oal::formats;
using namespace oal::fixtures;
using oal::eval::perplexity;
using oal::eval::PerplexityOptions;

namespace {

std::vector<int32_t> stream_of(int64_t n, int64_t vocab, uint64_t seed) {
  const at::Tensor t = oal::test::test_tokens(1, n, vocab, seed);
  std::vector<int32_t> s;
  for (int64_t v : oal::test::row(t, 0)) s.push_back(static_cast<int32_t>(v));
  return s;
}

}  // namespace

TEST(Perplexity, TokenNllMatchesLoops) {
  const at::Tensor logits = at::randn({2, 3, 5});
  const at::Tensor targets = at::tensor({0, 4, 2, 1, 1, 3}, at::kLong).view({2, 3});
  const at::Tensor got = oal::eval::token_nll(logits, targets);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t) {
      double z = 0;
      for (int64_t v = 0; v < 5; ++v) z += std::exp(logits[b][t][v].item<double>());
      const double want = std::log(z) - logits[b][t][targets[b][t].item<int64_t>()].item<double>();
      EXPECT_NEAR(got[b][t].item<double>(), want, 1e-5);  // fp32 log-sum-exp
    }
}

TEST(Perplexity, ProtocolMatchesIndependentComputation) {
  SyntheticOptions o;
  o.planted_scale = 3.0;
  const ModelWeights w = oal::test::synthetic_checkpoint(o, "ppl");
  const Transformer model(w);
  const int64_t ctx = 16;
  const auto stream = stream_of(4 * ctx + 7, w.config.vocab_size, 5);  // tail of 7 dropped
  // Independent: each block scored from an empty context with the plain fp64 forward.
  std::vector<double> block_means;
  double total = 0;
  for (int64_t b = 0; b < 4; ++b) {
    std::vector<int64_t> block(stream.begin() + b * ctx, stream.begin() + (b + 1) * ctx);
    const at::Tensor lp = at::log_softmax(oal::test::reference_logits(w, block), -1);
    double s = 0;
    for (int64_t t = 0; t + 1 < ctx; ++t) s -= lp[t][block[t + 1]].item<double>();
    block_means.push_back(s / (ctx - 1));
    total += s;
  }
  const double nll = total / (4 * (ctx - 1));
  double ss = 0;
  for (double m : block_means) ss += (m - nll) * (m - nll);
  const double se = std::sqrt(ss / 3 / 4);

  for (int64_t batch : {1, 3, 4, 8}) {
    const auto r = perplexity(model, stream, {.ctx = ctx, .batch = batch});
    EXPECT_EQ(r.blocks, 4);
    EXPECT_EQ(r.tokens, 4 * (ctx - 1));
    EXPECT_EQ(r.stream_tokens, 4 * ctx + 7);
    // fp32 model vs fp64 reference: NLLs agree to ~1e-6; 1e-5 relative is ample.
    EXPECT_NEAR(r.nll, nll, 1e-5 * nll) << "batch " << batch;
    EXPECT_NEAR(r.ppl, std::exp(nll), 1e-5 * std::exp(nll));
    ASSERT_TRUE(r.nll_stderr.has_value());
    EXPECT_NEAR(*r.nll_stderr, se, 1e-4 * se + 1e-9);
    EXPECT_NEAR(*r.ppl_stderr, r.ppl * *r.nll_stderr, 1e-12);
    ASSERT_EQ(r.block_nll.size(), 4u);
    for (int64_t b = 0; b < 4; ++b) EXPECT_NEAR(r.block_nll[b], block_means[b], 1e-5);
  }
  const auto two = perplexity(model, stream, {.ctx = ctx, .max_blocks = 2});
  EXPECT_EQ(two.blocks, 2);
  EXPECT_NEAR(two.nll, (block_means[0] + block_means[1]) / 2, 1e-5);
  const auto one = perplexity(model, stream, {.ctx = ctx, .max_blocks = 1});
  EXPECT_FALSE(one.nll_stderr.has_value());  // undefined with a single block
  // From block 1: blocks 1..3, each the same as scored in the whole run.
  const auto tail = perplexity(model, stream, {.ctx = ctx, .first_block = 1});
  EXPECT_EQ(tail.first_block, 1);
  ASSERT_EQ(tail.blocks, 3);
  for (int64_t b = 0; b < 3; ++b) EXPECT_NEAR(tail.block_nll[b], block_means[b + 1], 1e-5);
  const auto middle = perplexity(model, stream, {.ctx = ctx, .max_blocks = 1, .first_block = 2});
  ASSERT_EQ(middle.blocks, 1);
  EXPECT_NEAR(middle.nll, block_means[2], 1e-5);
}

TEST(Perplexity, RejectsBadInput) {
  SyntheticOptions o;
  o.max_position_embeddings = 64;
  const Transformer model(oal::test::synthetic_checkpoint(o, "bad"));
  const auto stream = stream_of(100, model.config().vocab_size, 2);
  auto message = [&](const std::vector<int32_t>& s, PerplexityOptions opt) {
    try {
      perplexity(model, s, opt);
    } catch (const oal::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({}, {.ctx = 16}).find("[perplexity] empty"), std::string::npos);
  EXPECT_NE(message(stream_of(10, 50, 1), {.ctx = 16}).find("shorter than one block"),
            std::string::npos);
  EXPECT_NE(message(stream, {.ctx = 65}).find("max_position_embeddings"), std::string::npos);
  EXPECT_NE(message(stream, {.ctx = 1}).find("ctx must be >= 2"), std::string::npos);
  EXPECT_NE(message(stream, {.ctx = 16, .batch = 0}).find("batch"), std::string::npos);
  EXPECT_NE(message(stream, {.ctx = 16, .max_blocks = -1}).find("max_blocks"), std::string::npos);
  EXPECT_NE(message(stream, {.ctx = 16, .first_block = -1}).find("first_block"), std::string::npos);
  // 100 tokens hold 6 blocks of 16: block 6 does not exist.
  EXPECT_NE(message(stream, {.ctx = 16, .first_block = 6}).find("past the text's 6 blocks"),
            std::string::npos);
}

TEST(Perplexity, Stories260kTinyStoriesReference) {
  auto model_path = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  auto tok_path = OAL_REQUIRE_SHARED_FILE("tok512.bin");
  auto text_path = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const Transformer model(load_model(model_path.string()));
  const auto tok = oal::text::load_tokenizer(tok_path);
  const auto stream = tok->encode(oal::text::read_text_file(text_path), false);
  ASSERT_EQ(stream.size(), 234251u);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = perplexity(model, stream, {.ctx = 256, .batch = 8});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.blocks, 915);
  EXPECT_EQ(r.tokens, 233325);
  EXPECT_NEAR(r.ppl, 5.0078, 5.0078 * 1e-3);  // the README's reference, within 0.1%
  EXPECT_NEAR(r.nll, 1.610987, 2e-4);
  RecordProperty("seconds", std::to_string(secs));
  std::printf("stories260K ppl %.5f ± %.5f, %.1f s, %.0f tokens/s\n", r.ppl, *r.ppl_stderr, secs,
              r.tokens_per_second);
}
