// `oal bench --train` library (bench/train_bench.h) on a tiny random model with a
// windowed OAL layer: one row per block length with its split, the converted layers
// named, the model left as it was (adapters detached, kernel parameters restored), and
// bad configurations refused. Speeds are not asserted (benchmarks, not tests).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "oal/bench/train_bench.h"
#include "oal/core/error.h"
#include "common/tiny_model.h"

namespace oal::bench {
namespace {

TEST(TrainBench, RowsPerVariantWithTheSplitAndTheModelRestored) {
  const auto w = test::tiny_weights(7, 3);
  model::Transformer m(w);
  const at::Tensor tokens = test::tiny_blocks(1, 24, 3);
  TrainBenchConfig c;
  c.variants = {"softmax", "hybrid"};
  c.hybrid_layers = "1";
  c.window = {1, 4};
  c.chunk = 4;
  c.groups = 2;
  c.contexts = {8, 24};
  c.repeats = 2;
  c.warmup = 1;
  const TrainBenchReport r = run_train_bench(m, "tiny", c);
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_GT(r.lora_parameters, 0);
  EXPECT_EQ(r.rows[0].variant, "softmax");
  EXPECT_EQ(r.rows[0].layers, "none");
  EXPECT_EQ(r.rows[0].kernel_parameters, 0);
  EXPECT_EQ(r.rows[2].variant, "hybrid");
  EXPECT_EQ(r.rows[2].layers, "1-1 of 3");
  // The windowed OAL layer trains L [Hq=2, G+1, G+1] = 2·3·3 and c_h [2].
  EXPECT_EQ(r.rows[2].kernel_parameters, 2 * 3 * 3 + 2);
  EXPECT_EQ(r.rows[3].ctx, 24);
  for (const auto& row : r.rows) {
    EXPECT_EQ(row.samples, 2);
    EXPECT_GT(row.tokens_per_s, 0.0);
    EXPECT_GT(row.backward_ms, 0.0);
    // The parts are timed inside the update: together at most the whole.
    EXPECT_LE(row.forward_ms + row.backward_ms + row.optimizer_ms, row.ms_max * 1.0001 + 1e-3);
  }
  // Adapters detached and every layer softmax again: the original model's logits.
  at::NoGradGuard g;
  EXPECT_TRUE(at::equal(m.forward(tokens), model::Transformer(w).forward(tokens)));
  EXPECT_EQ(m.attention(1).name(), "softmax");
  const auto j = nlohmann::json::parse(train_bench_json(r));
  EXPECT_EQ(j["rows"].size(), 4u);
  EXPECT_EQ(j["window"], "S=1,W=4");
  EXPECT_NE(train_bench_markdown(r).find("| hybrid | 1-1 of 3 |"), std::string::npos);
}

TEST(TrainBench, BadConfigurationsAreErrors) {
  model::Transformer m(test::tiny_weights(7, 2));
  auto fails = [&](TrainBenchConfig c, const std::string& what) {
    try {
      run_train_bench(m, "tiny", c);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "no error for " << what;
  };
  TrainBenchConfig c;
  c.contexts = {1};
  fails(c, "block length 1");
  c.contexts = {65};  // max_position_embeddings 64
  fails(c, "block length 65");
  c.contexts = {8};
  c.repeats = 0;
  fails(c, "repeats");
  c.repeats = 1;
  c.lora.rank = 0;
  fails(c, "rank");
  c.lora.rank = 8;
  c.variants = {"linear"};
  fails(c, "unknown model variant");
  c.variants = {"hybrid"};
  c.groups = 5;  // 1 + 2·4 dimensions > head_dim 8
  fails(c, "use --groups 4 or fewer");
  // Nothing was left attached by the failed runs.
  for (int64_t l = 0; l < m.num_layers(); ++l) EXPECT_EQ(m.layer(l).q_proj.delta, nullptr);
}

}  // namespace
}  // namespace oal::bench
