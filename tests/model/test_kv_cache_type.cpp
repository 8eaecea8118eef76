// The softmax layers' KV cache type (TransformerOptions::kv_cache, CLI --kv-cache): the
// real SmolLM2-135M GGUF decoding with an f16 cache against the same model with the exact
// fp32 cache. The kernel's own agreement with the softmax of half-rounded keys and values
// is in tests/attention/test_op_consistency.cpp ("softmax.decode.f16_cache"); the q8_0
// cache likewise ("softmax.decode.q8_0_cache"), here with its snapshot and refusals.
#include <gtest/gtest.h>

#include "common/shared_data.h"
#include "oal/attention/softmax/softmax_method.h"
#include "oal/core/error.h"
#include "oal/formats/load.h"
#include "oal/model/transformer.h"

using namespace oal;

namespace {

constexpr const char* k_model = "SmolLM2-135M-Instruct.Q4_1.gguf";

// Logits [56, V] of 56 fixed tokens: the first 40 prefilled into the states at once,
// the other 16 decoded one at a time (the same tokens for both caches, so the two runs
// never diverge by sampling).
at::Tensor prefill_then_decode(const model::Transformer& m) {
  const int64_t V = m.config().vocab_size;
  const at::Tensor tokens = (at::arange(56, at::kLong) * 7919 + 13).remainder(V).unsqueeze(0);
  auto states = m.new_states(1);
  std::vector<at::Tensor> logits = {m.logits(m.extend_hidden(tokens.narrow(1, 0, 40), states)[0])};
  for (int64_t i = 40; i < 56; ++i)
    logits.push_back(m.logits(m.extend_hidden(tokens.narrow(1, i, 1), states)[0]));
  return at::cat(logits, 0);
}

}  // namespace

TEST(KvCacheType, SmolLM2WithAnF16CacheDecodesLikeTheExactCache) {
  const auto path = test::model_cache_file(k_model);
  OAL_REQUIRE_PATH(path, "model file (scripts/fetch-models.sh)");
  at::NoGradGuard no_grad;
  const model::ModelWeights w = formats::load_model(path.string(), {.keep_quantized = true});
  const model::Transformer exact(w), half(w, {.kv_cache = attn::KvCacheType::f16});
  auto states = half.new_states(1);
  const at::Tensor one = at::zeros({1, 1}, at::kLong);
  half.extend_hidden(one, states);
  // Each softmax layer's cache holds 2 bytes per element: half of the fp32 cache.
  auto exact_states = exact.new_states(1);
  exact.extend_hidden(one, exact_states);
  EXPECT_EQ(2 * states[0]->state_bytes(), exact_states[0]->state_bytes());

  const at::Tensor a = prefill_then_decode(exact), b = prefill_then_decode(half);
  // Keys and values rounded to half precision (2^-11 relative) move the attention
  // weights by about |q·k|/sqrt(d) · 2^-11 and the outputs by 2^-11 of |v|; through 30
  // layers that is a few hundredths of a logit: measured 0.033 on logits up to 33
  // (AVX-512, 2026-12-05). 0.25 leaves room for other targets and thread counts, while
  // a cache read wrongly (a wrong stride, unwidened half bits, a missing token) changes
  // logits by whole units.
  const double diff = (a - b).abs().max().item<double>();
  EXPECT_LT(diff, 0.25) << "max |Δlogit| " << diff << " of max |logit| "
                        << a.abs().max().item<double>();
  EXPECT_GT(diff, 0.0) << "the f16 cache did round";
}

TEST(KvCacheType, SmolLM2WithAQ8_0CacheDecodesCloseToTheExactCache) {
  const auto path = test::model_cache_file(k_model);
  OAL_REQUIRE_PATH(path, "model file (scripts/fetch-models.sh)");
  at::NoGradGuard no_grad;
  const model::ModelWeights w = formats::load_model(path.string(), {.keep_quantized = true});
  const model::Transformer exact(w), q8(w, {.kv_cache = attn::KvCacheType::q8_0});
  auto states = q8.new_states(1);
  const at::Tensor one = at::zeros({1, 1}, at::kLong);
  q8.extend_hidden(one, states);
  // 34 bytes per 32 values (fp16 scale + 32 int8) against 4 bytes per value: 17/64.
  auto exact_states = exact.new_states(1);
  exact.extend_hidden(one, exact_states);
  EXPECT_EQ(64 * states[0]->state_bytes(), 17 * exact_states[0]->state_bytes());

  const at::Tensor a = prefill_then_decode(exact), b = prefill_then_decode(q8);
  // Rounding to int8 per 32 values moves each cached key and value by up to 1/254 of its
  // block's largest magnitude, ~16x the f16 cache's 2^-11, so the logits move by about
  // 16x the f16 cache's 0.033: measured 0.50 on logits up to 33 (AVX-512, 2026-12-05).
  // 1.5 leaves room for other targets and thread counts; a cache read wrongly (a wrong
  // row, block or scale) moves logits by tens.
  const double diff = (a - b).abs().max().item<double>();
  EXPECT_LT(diff, 1.5) << "max |Δlogit| " << diff << " of max |logit| "
                       << a.abs().max().item<double>();
  EXPECT_GT(diff, 0.0) << "the q8_0 cache did round";
  // The same prediction at every position the exact cache is confident about (top logit
  // ahead of the second by more than the bound above).
  const auto top2 = a.topk(2, 1);
  const at::Tensor confident = (std::get<0>(top2).select(1, 0) - std::get<0>(top2).select(1, 1)) > 1.5;
  EXPECT_TRUE(at::equal(a.argmax(1).masked_select(confident), b.argmax(1).masked_select(confident)));
}

TEST(KvCacheType, Q8_0CacheRestoresFromItsSnapshotExactly) {
  // A q8_0 cache's snapshot holds its decoded values; quantizing them again gives the same
  // blocks (the scale max|x|/127 of decoded values is the stored fp16 scale, and each
  // decoded value divided by it is its integer again), so a restored cache continues
  // bit for bit as the original.
  at::NoGradGuard no_grad;
  attn::SoftmaxAttention method(128, std::nullopt, attn::KvCacheType::q8_0);
  auto a = method.new_state(1);
  const at::Tensor q = at::randn({1, 4, 20, 64}), k = at::randn({1, 2, 20, 64}), v = at::randn({1, 2, 20, 64});
  a->extend(q.narrow(2, 0, 12), k.narrow(2, 0, 12), v.narrow(2, 0, 12));
  auto b = method.new_state(1);
  b->restore(a->snapshot());
  EXPECT_EQ(b->state_bytes(), a->state_bytes());
  const at::Tensor ya = a->extend(q.narrow(2, 12, 8), k.narrow(2, 12, 8), v.narrow(2, 12, 8));
  const at::Tensor yb = b->extend(q.narrow(2, 12, 8), k.narrow(2, 12, 8), v.narrow(2, 12, 8));
  EXPECT_TRUE(at::equal(ya, yb));
}

TEST(KvCacheType, Q8_0CacheRefusesHeadDimensionsItCannotBlock) {
  at::NoGradGuard no_grad;
  attn::SoftmaxAttention method(128, std::nullopt, attn::KvCacheType::q8_0);
  auto st = method.new_state(1);
  const at::Tensor x = at::randn({1, 2, 3, 48});
  try {
    st->extend(x, x, x);
    ADD_FAILURE() << "D = 48 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiples of 32, got D=48"), std::string::npos) << e.what();
  }
  EXPECT_EQ(st->tokens(), 0) << "nothing cached from the refused call";
}
