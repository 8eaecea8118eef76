// Layer scores for `oal convert --layers auto:K` (analysis/layer_scores.h): the JSON round
// trip, the choice of the least-attending layers, and malformed files as named errors.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/temp_dir.h"
#include "oal/analysis/layer_scores.h"
#include "oal/core/error.h"

namespace oal::analysis {
namespace {

LayerScores example() {
  return {{4, 64},
          1024,
          8,
          {{0, {0.5, 0.7}}, {1, {0.1, 0.1}}, {2, {0.3, 0.1}}, {3, {0.2, 0.0}}, {4, {0.9, 0.9}}}};
}

// The error reading `j` as a scores file in `dir` gives ("" when it reads).
std::string read_error(const std::filesystem::path& dir, const nlohmann::json& j) {
  std::ofstream(dir / "bad.json") << j.dump();
  try {
    read_layer_scores(dir / "bad.json");
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::string();
}

TEST(LayerScores, RoundTripAndLeastAttendingLayers) {
  const auto dir = test::make_temp_dir("layer_scores");
  const LayerScores s = example();
  std::ofstream(dir / "s.json") << layer_scores_to_json(s).dump();
  const LayerScores back = read_layer_scores(dir / "s.json");
  EXPECT_EQ(back.window, s.window);
  EXPECT_EQ(back.ctx, 1024);
  ASSERT_EQ(back.layers.size(), 5u);
  EXPECT_EQ(back.layers[2].heads, s.layers[2].heads);
  // Means 0.6, 0.1, 0.2, 0.1, 0.9: layers 1 and 3 tie at 0.1 (lower index first), then 2.
  EXPECT_EQ(least_window_mass_layers(back, 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(least_window_mass_layers(back, 3), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(least_window_mass_layers(back, 5), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_THROW(least_window_mass_layers(back, 0), Error);
  EXPECT_THROW(least_window_mass_layers(back, 6), Error);
}

TEST(LayerScores, MalformedFilesAreNamedErrors) {
  const auto dir = test::make_temp_dir("layer_scores_bad");
  const nlohmann::json good = layer_scores_to_json(example());
  auto error_for = [&](const nlohmann::json& j) { return read_error(dir, j); };
  nlohmann::json j = good;
  j["format"] = "other";
  EXPECT_NE(error_for(j).find("[layer_scores]"), std::string::npos);
  j = good;
  j["layers"][1]["heads"][0] = 1.5;
  EXPECT_NE(error_for(j).find("[0, 1]"), std::string::npos);
  j = good;
  j["layers"][2]["layer"] = 0;
  EXPECT_NE(error_for(j).find("ascending"), std::string::npos);
  j = good;
  j["layers"] = nlohmann::json::array();
  EXPECT_NE(error_for(j).find("non-empty"), std::string::npos);
  j = good;
  j["window"] = -3;
  EXPECT_NE(error_for(j).find("window"), std::string::npos);
  j = good;
  j["format"] = nlohmann::json::array();  // found by fuzz_layer_scores: escaped as a type_error
  EXPECT_NE(error_for(j).find("oal-layer-scores"), std::string::npos);
  j = good;
  j["layers"][0]["layer"] = 1.5;
  EXPECT_NE(error_for(j).find("integer"), std::string::npos);
}

// Retrieval masses round-trip beside the window masses, and must be on every layer or
// none, one per head, in [0, 1].
TEST(LayerScores, RetrievalMassesRoundTripAndAreChecked) {
  const auto dir = test::make_temp_dir("layer_scores_retrieval");
  LayerScores s = example();
  for (auto& l : s.layers) l.retrieval = {0.25, double(l.layer) / 8};
  std::ofstream(dir / "s.json") << layer_scores_to_json(s).dump();
  const LayerScores back = read_layer_scores(dir / "s.json");
  for (size_t i = 0; i < s.layers.size(); ++i)
    EXPECT_EQ(back.layers[i].retrieval, s.layers[i].retrieval);
  // One KV head per two query heads: layer 4 (0.5), then layer 3 (0.375), ...
  const auto kept = most_retrieving_kv_heads(back, 2, {0, 1, 2, 3, 4}, 1);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept.at(4).kv, (std::vector<int64_t>{0}));
  EXPECT_EQ(kept.at(3).kv, (std::vector<int64_t>{0}));
  EXPECT_THROW(most_retrieving_kv_heads(back, 1, {7}, 1), Error);   // not scored
  EXPECT_THROW(most_retrieving_kv_heads(back, 1, {0}, 3), Error);   // 2 heads over 3
  EXPECT_THROW(most_retrieving_kv_heads(back, 0, {0, 1}, 1), Error);

  auto error_for = [&](const nlohmann::json& j) { return read_error(dir, j); };
  nlohmann::json j = layer_scores_to_json(s);
  j["layers"][2].erase("retrieval");
  EXPECT_NE(error_for(j).find("every layer or for none"), std::string::npos);
  j = layer_scores_to_json(s);
  j["layers"][1]["retrieval"] = {0.1};
  EXPECT_NE(error_for(j).find("1 retrieval masses for 2 heads"), std::string::npos);
  j = layer_scores_to_json(s);
  j["layers"][0]["retrieval"][1] = -0.5;
  EXPECT_NE(error_for(j).find("[0, 1]"), std::string::npos);
}

}  // namespace
}  // namespace oal::analysis
