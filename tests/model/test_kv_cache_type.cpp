// The softmax layers' KV cache type (TransformerOptions::kv_cache, CLI --kv-cache): the
// real SmolLM2-135M GGUF decoding with an f16 cache against the same model with the exact
// fp32 cache. The kernel's own agreement with the softmax of half-rounded keys and values
// is in tests/attention/test_op_consistency.cpp ("softmax.decode.f16_cache").
#include <gtest/gtest.h>

#include "common/shared_data.h"
#include "oal/model/load.h"
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
  const model::ModelWeights w = model::load_model(path.string(), {.keep_quantized = true});
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
