// analysis.json round trip and validation; figure writers; the grouping summary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "oal/analysis/analysis_json.h"
#include "oal/analysis/figures.h"
#include "oal/analysis/layer_groups.h"
#include "oal/core/error.h"
#include "oal/figures/svg_bars.h"
#include "oal/figures/svg_heatmap.h"

namespace oa = oal::analysis;

namespace {

// A small hand-made analysis: 1 layer, 2 heads, d = 4, 3 prompts; dim 3 dominates.
oa::AnalysisResult tiny_result() {
  oa::AnalysisResult r;
  r.model = "tiny";
  r.num_layers = 2;
  r.num_heads = 2;
  r.num_kv_heads = 1;
  r.head_dim = 4;
  r.hidden_size = 8;
  r.top_k = 2;
  r.ctx = 16;
  r.seed = 3;
  r.calibration_lengths = {5, 6, 7};
  oa::LayerAnalysis l;
  l.layer = 1;
  l.activation = oa::summarize_activations({1, 2, 30, 4, 5, 6, 7, 8});
  for (int64_t h = 0; h < 2; ++h) {
    oa::HeadAnalysis x;
    x.head = h;
    x.chi_per_prompt = {{0.1, 0.2, 0.1, 3.0}, {0.1, 0.1, 0.2, 4.0}, {0.2, 0.1, 0.1, 5.0}};
    // All contributions positive: the per-prompt magnitudes are the same rows.
    x.magnitude_per_prompt = x.chi_per_prompt;
    x.chi = {0.4 / 3, 0.4 / 3, 0.4 / 3, 4.0};
    x.magnitude = {0.2, 0.2, 0.2, 4.0};
    x.order = {0, 1, 2, 3};
    x.top_dims = {3, 0};
    x.top_share = 4.2 / 4.6;
    x.gaussian_top_share = 0.55;
    x.gaussian_real_coords_share = 0.5;
    x.chi_heldout = {0.1, 0.1, 0.1, 3.5};
    x.heldout_spearman = 0.9;
    x.heldout_top_overlap = 2;
    x.prefix_top_dims = {3, 1};
    x.prefix = {{8, {90.0, 3.0}, 0.8}, {16, {91.0, 2.0}, 1.0}};
    l.heads.push_back(x);
  }
  r.layers.push_back(l);
  return r;
}

}  // namespace

TEST(AnalysisJson, RoundTripKeepsEveryField) {
  const oa::AnalysisResult r = tiny_result();
  const oa::AnalysisResult back = oa::analysis_from_json(oa::analysis_to_json(r));
  EXPECT_EQ(back.model, "tiny");
  EXPECT_EQ(back.seed, 3u);
  EXPECT_EQ(back.calibration_lengths, r.calibration_lengths);
  ASSERT_EQ(back.layers.size(), 1u);
  const auto& h = back.layer(1).heads[1];
  EXPECT_EQ(h.chi_per_prompt, r.layers[0].heads[1].chi_per_prompt);
  EXPECT_EQ(h.magnitude_per_prompt, r.layers[0].heads[1].magnitude_per_prompt);
  EXPECT_EQ(back.chi, oa::ChiStatistic::mean_abs);
  EXPECT_EQ(h.chi, r.layers[0].heads[1].chi);
  EXPECT_EQ(h.chi_heldout, r.layers[0].heads[1].chi_heldout);
  EXPECT_EQ(h.prefix.size(), 2u);
  EXPECT_EQ(h.prefix[1].normalized_top, (std::vector<double>{91.0, 2.0}));
  EXPECT_EQ(back.layers[0].activation.top_dims, (std::vector<int64_t>{2, 7, 6}));
  EXPECT_THROW(back.layer(0), oal::Error);
}

TEST(AnalysisJson, FileRoundTripAndCorruptFiles) {
  const auto dir = std::filesystem::temp_directory_path() / "oal_test_analysis_io";
  std::filesystem::create_directories(dir);
  oa::write_analysis(dir / "a.json", tiny_result());
  EXPECT_EQ(oa::read_analysis(dir / "a.json").layers[0].heads[0].chi_per_prompt.size(), 3u);
  {
    std::ofstream(dir / "bad.json") << "{ not json";
  }
  EXPECT_THROW(oa::read_analysis(dir / "bad.json"), oal::Error);
  EXPECT_THROW(oa::read_analysis(dir / "missing.json"), oal::Error);
  auto j = oa::analysis_to_json(tiny_result());
  auto wrong_tag = j;
  wrong_tag["format"] = "something-else";
  EXPECT_THROW(oa::analysis_from_json(wrong_tag), oal::Error);
  auto short_chi = j;
  short_chi["layers"][0]["heads"][0]["chi_per_prompt"][1] = {1.0, 2.0};
  EXPECT_THROW(oa::analysis_from_json(short_chi), oal::Error);
  auto no_heads = j;
  no_heads["layers"][0]["heads"].erase(1);
  EXPECT_THROW(oa::analysis_from_json(no_heads), oal::Error);
  std::filesystem::remove_all(dir);
}

// Integer fields holding floats (nlohmann's get<int64_t>() would cast 1e300, undefined
// behaviour) or values of the wrong kind are named errors with the field's path.
TEST(AnalysisJson, MistypedFieldsAreNamedErrors) {
  const auto j = oa::analysis_to_json(tiny_result());
  auto expect = [](const nlohmann::json& bad, const std::string& expected) {
    try {
      oa::analysis_from_json(bad);
      ADD_FAILURE() << "no error for " << expected;
    } catch (const oal::Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("[analysis json]", 0), 0u) << m;
      EXPECT_NE(m.find(expected), std::string::npos) << m;
    }
  };
  auto bad = j;
  bad["head_dim"] = 1e300;
  expect(bad, "analysis.head_dim must be an integer, got a non-integer number");
  bad = j;
  bad["version"] = 1.5;
  expect(bad, "analysis.version must be an integer");
  bad = j;
  bad["seed"] = -3;
  expect(bad, "analysis.seed must be a non-negative integer");
  bad = j;
  bad["calibration_lengths"][1] = 6.5;
  expect(bad, "analysis.calibration_lengths must be an integer");
  bad = j;
  bad["layers"][0]["heads"][1]["top_dims"][0] = 3.5e32;
  expect(bad, "layers[1].heads[1].top_dims must be an integer");
  bad = j;
  bad["layers"][0]["layer"] = "1";
  expect(bad, "layers[].layer must be an integer, got a string");
  bad = j;
  bad["format"] = 3;  // nlohmann's value("format", "") would throw its own type_error
  expect(bad, "expected an object with \"format\"");
}

// The shape of the input fuzz_analysis_json found (10-minute run, 2026-12-02): "format"
// given twice, the later one (which nlohmann keeps) an array; value("format", "") threw
// nlohmann's type_error, which escaped read_analysis.
TEST(AnalysisJson, FormatThatIsAnArrayIsANamedError) {
  try {
    oa::read_analysis(std::string(OAL_SOURCE_DIR) + "/tests/analysis/data/format_is_array.json");
    ADD_FAILURE() << "no error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected an object with \"format\""), std::string::npos)
        << e.what();
  }
}

TEST(LayerGroups, GroupsEveryHeadAndSummarises) {
  oa::GroupingOptions o;
  o.alpha = 0.5;
  o.bootstrap = 100;
  const auto groups = oa::group_analysis(tiny_result(), o);
  ASSERT_EQ(groups.size(), 1u);
  ASSERT_EQ(groups[0].heads.size(), 2u);
  // d = 4, α = 0.5 → candidates k = 2, 3; only k = 3 (dim 3 vs the rest, ratio >= 15 in
  // every replicate) is natural.
  EXPECT_EQ(groups[0].heads[0].cuts, (std::vector<int64_t>{3}));
  EXPECT_EQ(groups[0].heads[0].groups[1], (std::vector<int64_t>{3}));
  const auto j = oa::groups_summary_json(groups, o, 0);
  EXPECT_EQ(j["layers"][0]["heads"][1]["outlier_dims"], (std::vector<int64_t>{3}));
  const std::string table = oa::groups_summary_table(groups);
  EXPECT_NE(table.find("G=2: 2 heads"), std::string::npos) << table;
  const auto kernels = oa::taylor_kernels(groups[0]);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].num_groups(), 2);
  // Taylor: a = 1, b_r = 1, C_rt = 1/2 for every dimension and pair.
  const auto c = kernels[0].coefficients();
  EXPECT_NEAR(c.a, 1.0, 1e-12);
  EXPECT_NEAR(c.b[3].item<double>(), 1.0, 1e-12);
  EXPECT_NEAR(c.C[0][3].item<double>(), 0.5, 1e-12);
  const auto fixed = oa::group_analysis(tiny_result(), o, 3);
  EXPECT_EQ(fixed[0].heads[0].num_groups(), 3);
  EXPECT_THROW(oa::group_analysis(tiny_result(), o, 5), oal::Error);
}

TEST(Figures, SvgOutputsHaveOneMarkPerValue) {
  const oa::AnalysisResult r = tiny_result();
  oa::GroupingOptions o;
  o.alpha = 0.5;
  o.bootstrap = 20;
  const auto groups = oa::group_analysis(r, o);
  const std::string bars = oa::contribution_profile_svg(r.layers[0], groups[0].heads, "tiny");
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(bars.rfind("<svg", 0), 0u);
  EXPECT_EQ(count(bars, "<title>"), 8u);  // 2 heads × 4 dims
  EXPECT_NE(bars.find("group 0 (bulk)"), std::string::npos);
  EXPECT_NE(bars.find("#D55E00"), std::string::npos);  // group 1 colour used
  const std::string heat = oa::top_share_heatmap_svg(r);
  EXPECT_EQ(count(heat, "<title>"), 2u);
  EXPECT_NE(heat.find("91"), std::string::npos);  // 4.2 / 4.6 = 91%
  EXPECT_NE(oa::activation_profile_svg(r).find("Median"), std::string::npos);
  oal::figures::Heatmap bad;
  bad.values = {{1.0, 2.0}, {3.0}};
  bad.row_labels = {"a", "b"};
  bad.col_labels = {"x", "y"};
  EXPECT_THROW(oal::figures::heatmap_svg(bad), oal::Error);
  EXPECT_THROW(oal::figures::bar_grid_svg("t", {}, 2, {}, "x", "y"), oal::Error);
  EXPECT_THROW(oal::figures::bar_grid_svg("t", {{"p", {1.0, NAN}, {}, {}}}, 2, {}, "x", "y"),
               oal::Error);
}
