// The tour's SmolLM2 section end to end on the real GGUF model (short fits: their
// quality is tested in calib): every method has a row, softmax is exactly 0, the head
// notes name outlier dimensions, and both continuations are there. The original's
// greedy continuation is checked against llama.cpp's in tests/eval.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/shared_data.h"
#include "oal/attention/registry.h"
#include "oal/demo/demo_smollm2.h"

namespace oal::demo {
namespace {

TEST(DemoSmolLM2, OneLayerThroughThePipeline) {
  const auto model = test::model_cache_file("SmolLM2-135M-Instruct.Q4_1.gguf");
  OAL_REQUIRE_PATH(model, "SmolLM2 GGUF (scripts/fetch-models.sh)");
  const auto text = OAL_REQUIRE_SHARED_FILE("wikitext2-test.raw");
  SmolLM2DemoOptions o;
  o.model = model.string();
  o.text = text.string();
  o.max_updates = 2;
  o.prompts = 4;
  o.new_tokens = 4;
  const DemoSection s = smollm2_demo(o);
  ASSERT_EQ(s.notes.size(), 6u);
  EXPECT_NE(s.notes[1].find("head 0: "), std::string::npos) << s.notes[1];
  EXPECT_GT(s.notes[4].size(), std::string("  original:           ").size());
  EXPECT_GT(s.notes[5].size(), std::string("  layer 15 as OAL:    ").size());
  std::set<std::string> methods;
  for (const auto& row : s.rows) {
    methods.insert(row[0]);
    const double relmse = std::stod(row[2]);
    if (row[0] == "softmax") EXPECT_EQ(relmse, 0.0);
    else EXPECT_TRUE(std::isfinite(relmse) && relmse > 0) << row[0] << " " << row[2];
  }
  const auto names = attn::method_names(attn::Window{});
  EXPECT_EQ(methods, std::set<std::string>(names.begin(), names.end()));
}

}  // namespace
}  // namespace oal::demo
