// `oal bench --model` library (bench/model_bench.h) on a tiny random model: every cell is
// reported, the converted-layer ranges and state sizes are what the variants promise,
// and bad configurations are errors. Speeds are not asserted (benchmarks, not tests).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "oal/bench/model_bench.h"
#include "oal/core/error.h"
#include "oal/simd/oal_plan.h"
#include "common/tiny_model.h"

namespace oal::bench {
namespace {

ModelBenchConfig tiny_config() {
  ModelBenchConfig c;
  c.prefill_lengths = {16};
  c.decode_contexts = {8, 32};
  c.repeats = 1;
  c.warmup = 0;
  c.decode_steps = 2;
  c.chunk = 8;
  c.groups = 2;
  return c;
}

const ModelBenchRow& find(const ModelBenchReport& r, const std::string& variant,
                          const std::string& mode, int64_t n) {
  for (const auto& row : r.rows)
    if (row.variant == variant && row.mode == mode && row.n == n) return row;
  throw std::runtime_error("row not found: " + variant + " " + mode);
}

TEST(ModelBench, VariantsCellsAndStates) {
  model::Transformer m(test::tiny_weights(7, 5));  // 5 layers: hybrid = 1-3
  const ModelBenchReport r = run_model_bench(m, "tiny", tiny_config());
  ASSERT_EQ(r.rows.size(), 9u);  // 3 variants x (1 prefill + 2 decode)
  for (const auto& row : r.rows) {
    EXPECT_GT(row.ms_median, 0.0) << row.variant;
    EXPECT_GT(row.tokens_per_s, 0.0) << row.variant;
  }
  EXPECT_EQ(find(r, "softmax", "prefill", 16).layers, "none");
  EXPECT_EQ(find(r, "oal", "prefill", 16).layers, "0-4 of 5");
  EXPECT_EQ(find(r, "hybrid", "prefill", 16).layers, "1-3 of 5");
  EXPECT_GT(find(r, "oal", "prefill", 16).gflops, 0.0);
  // Every layer's state: OAL Df x (Dv + 1) fp32 per KV head, constant in the context;
  // softmax N x (D + Dv) fp32 per KV head (the kernel cache), plus the decoded tokens.
  const int64_t oal_layer = simd::oal_feature_dim(8) * 9 * 4;
  EXPECT_EQ(find(r, "oal", "decode", 8).state_bytes, 5 * oal_layer);
  EXPECT_EQ(find(r, "oal", "decode", 32).state_bytes, 5 * oal_layer);
  const int64_t steps = 2 + 2;  // warm-up + timed tokens
  EXPECT_EQ(find(r, "softmax", "decode", 32).state_bytes, 5 * (32 + steps) * 16 * 4);
  EXPECT_EQ(find(r, "hybrid", "decode", 32).state_bytes,
            3 * oal_layer + 2 * (32 + steps) * 16 * 4);
  // The model is handed back with softmax everywhere.
  for (int64_t l = 0; l < 5; ++l) EXPECT_EQ(m.attention(l).name(), "softmax");
  const auto j = nlohmann::json::parse(model_bench_json(r));
  EXPECT_EQ(j.at("rows").size(), 9u);
  // The code each variant ran: the hybrid's attention in two entries, flash on the
  // softmax layers 0 and 4 and the HD state on 1-3.
  const auto& hybrid_ops = j.at("fast_paths").at("hybrid").at("ops");
  std::vector<std::string> attention;
  for (const auto& op : hybrid_ops)
    if (op.at("op") == "attention") attention.push_back(op.at("layer_ranges"));
  EXPECT_EQ(attention, (std::vector<std::string>{"0,4", "1-3"}));
  EXPECT_EQ(j.at("fast_paths").size(), 3u);
  EXPECT_NE(model_bench_markdown(r).find("| hybrid | 1-3 of 5 | decode | 32 |"), std::string::npos);
  EXPECT_NE(model_bench_csv(r).find("variant,converted,mode,n,"), std::string::npos);
}

TEST(ModelBench, BadConfigurationsAreErrors) {
  model::Transformer m(test::tiny_weights(7, 5));
  ModelBenchConfig c = tiny_config();
  c.variants = {"softmax", "flash"};
  EXPECT_THROW(run_model_bench(m, "tiny", c), Error);
  c = tiny_config();
  c.hybrid_layers = "2-9";
  EXPECT_THROW(run_model_bench(m, "tiny", c), Error);
  c = tiny_config();
  c.decode_contexts = {0};
  EXPECT_THROW(run_model_bench(m, "tiny", c), Error);
}

}  // namespace
}  // namespace oal::bench
