// Hybrid models: default layer ranges, bounds, and generation memory (KV cache grows in
// softmax layers, the HD state of converted layers stays constant).
#include <gtest/gtest.h>

#include "common/tiny_model.h"
#include "oal/adapt/hybrid.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/core/error.h"

namespace {

using namespace oal;

// The paper's two settings (App. F): Qwen2.5-0.5B 24 layers → 3..20, Llama-3.2-1B 16
// layers → 1..14; the documented rule elsewhere (three kept from 24 layers, else one).
std::vector<int64_t> range(int64_t first, int64_t last) {
  std::vector<int64_t> out;
  for (int64_t l = first; l <= last; ++l) out.push_back(l);
  return out;
}

TEST(Hybrid, DefaultRangeIsThePapersForQwenAndLlamaDepths) {
  EXPECT_EQ(adapt::default_converted_layers(24), range(3, 20));  // Qwen2.5-0.5B
  EXPECT_EQ(adapt::default_converted_layers(16), range(1, 14));  // Llama-3.2-1B
  EXPECT_EQ(adapt::default_converted_layers(32), range(3, 28));
  EXPECT_EQ(adapt::default_converted_layers(23), range(1, 21));
  EXPECT_EQ(adapt::default_converted_layers(7), range(1, 5));
  EXPECT_EQ(adapt::default_converted_layers(5), range(1, 3));  // stories260K
  EXPECT_EQ(adapt::default_converted_layers(3), range(1, 1));
  EXPECT_THROW(adapt::default_converted_layers(2), Error);
  EXPECT_EQ(adapt::parse_converted_layers("default", 16), range(1, 14));
  EXPECT_EQ(adapt::parse_converted_layers("1-3", 5), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_THROW(adapt::parse_converted_layers("1-5", 5), Error);
  EXPECT_EQ(adapt::default_range_rule(16),
            "default: layers 1-14 of 16, one softmax layer kept at each end (below 24 layers)");
  EXPECT_EQ(adapt::default_range_rule(24),
            "default: layers 3-20 of 24, three softmax layers kept at each end (from 24 layers)");
}

TEST(Hybrid, ConvertedLayersHoldConstantStateWhileSoftmaxCachesGrow) {
  model::Transformer m(test::tiny_weights());
  auto oal_method =
      std::make_shared<attn::QuadraticAttention>(attn::QuadraticAttention::from_kernels(
          {attn::QuadraticKernel::taylor({{0, 1, 2, 3, 4, 5}, {6, 7}}),
           attn::QuadraticKernel::taylor({{0, 1, 2, 3}, {4, 5, 6, 7}})},
          {}, false));
  adapt::apply_hybrid(m, {{1, oal_method}});
  EXPECT_THROW(adapt::apply_hybrid(m, {{3, oal_method}}), Error);
  auto states = [&] {
    std::vector<std::unique_ptr<attn::DecodeState>> st = m.new_states(1);
    m.extend_hidden(at::arange(8, at::kLong).unsqueeze(0), st);
    auto before = adapt::layer_state_bytes(m, st);
    m.extend_hidden(at::arange(20, at::kLong).unsqueeze(0) % 32, st);
    return std::make_pair(before, adapt::layer_state_bytes(m, st));
  }();
  const auto& [before, after] = states;
  EXPECT_EQ(before[1].method, "oal");
  EXPECT_EQ(before[0].method, "softmax");
  EXPECT_EQ(after[1].bytes, before[1].bytes);  // constant-size HD state
  EXPECT_GT(after[0].bytes, before[0].bytes);  // KV cache grows with context
  EXPECT_GT(after[2].bytes, before[2].bytes);
  // The HD state: [B, Hkv, Df, Dv + 1] fp32 with Df = 1 + 8 + 36 = 45.
  EXPECT_EQ(after[1].bytes, 1 * 1 * 45 * 9 * 4);
}

}  // namespace
