// `oal analyze` and `oal group` end to end on stories260K, and their input errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "common/shared_data.h"
#include "oal/attention/oal/kernel_json.h"

namespace fs = std::filesystem;

namespace {

using oal::test::run_oal;
using Result = oal::test::CliResult;
using read_all_fn = std::string (*)(const fs::path&);
constexpr read_all_fn read_all = oal::test::read_file;

fs::path analysis_temp_dir() {
  return oal::test::temp_dir(std::string("analysis_") +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
}

}  // namespace

TEST(CliAnalysis, Stories260KAnalyzeThenGroup) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const fs::path dir = analysis_temp_dir();
  const fs::path out = dir / "analysis";
  Result a = run_oal("analyze --model '" + model.string() + "' --text '" + text.string() +
                         "' --out '" + out.string() +
                         "' --prompts 40 --heldout-fraction 0.25 --ctx 128 --bootstrap 200 "
                         "--after-tokens 6656 --json",
                     dir);
  ASSERT_EQ(a.status, 0) << a.err;
  const auto summary = nlohmann::json::parse(a.out);
  EXPECT_EQ(summary["layers"].size(), 5u);
  for (const char* f : {"analysis.json", "contribution_layer0.svg", "contribution_layer4.svg",
                        "activation_profile.svg", "top_share_heatmap.svg"})
    EXPECT_TRUE(fs::exists(out / f)) << f;

  Result g = run_oal("group --analysis '" + (out / "analysis.json").string() + "' --out '" +
                         (dir / "kernels.json").string() + "' --bootstrap 200 --seed 1",
                     dir);
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_NE(g.out.find("group counts:"), std::string::npos) << g.out;
  const oal::attn::ModelKernels k = oal::attn::read_kernels(dir / "kernels.json");
  EXPECT_EQ(k.head_dim, 8);
  ASSERT_EQ(k.layers.size(), 5u);
  for (const auto& [layer, heads] : k.layers) {
    ASSERT_EQ(heads.size(), 8u);
    for (const auto& kernel : heads) EXPECT_GE(kernel.num_groups(), 2) << "layer " << layer;
  }
  // Same seed → same file.
  Result g2 = run_oal("group --analysis '" + (out / "analysis.json").string() + "' --out '" +
                          (dir / "kernels2.json").string() + "' --bootstrap 200 --seed 1 --quiet",
                      dir);
  ASSERT_EQ(g2.status, 0) << g2.err;
  EXPECT_EQ(read_all(dir / "kernels.json"), read_all(dir / "kernels2.json"));
  // Fixed budget.
  Result gb = run_oal("group --analysis '" + (out / "analysis.json").string() + "' --out '" +
                          (dir / "k3.json").string() + "' --budget 3 --json",
                      dir);
  ASSERT_EQ(gb.status, 0) << gb.err;
  EXPECT_EQ(nlohmann::json::parse(gb.out)["layers"][0]["heads"][0]["group_count"], 3);
  // The statistic is recorded: analyze's default and group's --chi.
  EXPECT_EQ(nlohmann::json::parse(read_all(out / "analysis.json"))["chi_statistic"], "mean-abs");
  EXPECT_EQ(k.meta["grouping"]["chi_statistic"], "mean-abs");
  Result gs = run_oal("group --analysis '" + (out / "analysis.json").string() + "' --out '" +
                          (dir / "ks.json").string() + "' --bootstrap 50 --chi signed --quiet",
                      dir);
  ASSERT_EQ(gs.status, 0) << gs.err;
  EXPECT_EQ(oal::attn::read_kernels(dir / "ks.json").meta["grouping"]["chi_statistic"], "signed");
  Result gbad = run_oal("group --analysis '" + (out / "analysis.json").string() + "' --out '" +
                            (dir / "kx.json").string() + "' --chi absolute --quiet",
                        dir);
  EXPECT_NE(gbad.status, 0);
  EXPECT_FALSE(fs::exists(dir / "kx.json"));
  fs::remove_all(dir);
}

TEST(CliAnalysis, BadInputExitsWithAClearError) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const fs::path dir = analysis_temp_dir();
  const std::string base = "analyze --model '" + model.string() + "' --out '" +
                           (dir / "a").string() + "' --quiet ";
  {
    std::ofstream(dir / "empty.txt") << "\n\n  \n";
  }
  // (--after-tokens 0: these tiny texts have no room for the default 26 x ctx tokens.)
  Result empty = run_oal(base + "--after-tokens 0 --text '" + (dir / "empty.txt").string() + "'", dir);
  EXPECT_EQ(empty.status, 1);
  EXPECT_NE(empty.err.find("no paragraphs"), std::string::npos) << empty.err;
  {
    std::ofstream(dir / "three.txt") << "One day.\n\nTwo days.\n\nThree days.\n";
  }
  Result few = run_oal(base + "--after-tokens 0 --text '" + (dir / "three.txt").string() + "' --prompts 5", dir);
  EXPECT_EQ(few.status, 1);
  EXPECT_NE(few.err.find("the text has 3 paragraphs"), std::string::npos) << few.err;
  Result layer = run_oal(base + "--text '" + text.string() + "' --layers 7", dir);
  EXPECT_EQ(layer.status, 1);
  EXPECT_NE(layer.err.find("error:"), std::string::npos) << layer.err;
  Result alpha = run_oal(base + "--text '" + text.string() + "' --alpha 1.5", dir);
  EXPECT_EQ(alpha.status, 1);
  EXPECT_NE(alpha.err.find("alpha = 1.5"), std::string::npos) << alpha.err;
  // By default the prompts start after calibrate's 26 x ctx tokens, which a tiny text lacks.
  Result tiny = run_oal(base + "--text '" + (dir / "three.txt").string() + "'", dir);
  EXPECT_EQ(tiny.status, 1);
  EXPECT_NE(tiny.err.find("within the first 6656 tokens"), std::string::npos) << tiny.err;
  // --after-tokens beyond the text: no prompt is left, said so.
  Result after = run_oal(base + "--text '" + text.string() + "' --after-tokens 100000000", dir);
  EXPECT_EQ(after.status, 1);
  EXPECT_NE(after.err.find("all lie within the first 100000000 tokens"), std::string::npos)
      << after.err;
  EXPECT_FALSE(fs::exists(dir / "a" / "analysis.json"));
  fs::remove_all(dir);
}
