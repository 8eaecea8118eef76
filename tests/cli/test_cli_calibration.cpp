// `oal linearize` (analyze -> group -> calibrate -> fidelity) on stories260K, then
// `oal fidelity` and `oal diagnose` on its run directory. The fits use reduced update
// counts (--max-updates 100 --val-every 50 --patience 100) to keep CI time short; the
// full protocol (1000 / 100 / 400) is the default and is what docs/results.md records.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "common/shared_data.h"
#include "oal/attention/oal/kernel_json.h"

namespace fs = std::filesystem;

namespace {

using oal::test::run_oal;
using Result = oal::test::CliResult;

fs::path temp_dir(const std::string& name) { return oal::test::temp_dir("calib_" + name); }

}  // namespace

TEST(CliCalibration, LinearizeStories260KReportsSevenRows) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const fs::path dir = temp_dir("linearize"), run = dir / "run";
  Result r = run_oal("linearize --model '" + model.string() + "' --text '" + text.string() +
                         "' --ctx 256 --out '" + run.string() +
                         "' --bootstrap 200 --max-updates 100 --val-every 50 --patience 100 --quiet --json",
                     dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const std::vector<std::string> want{"softmax", "oal", "global", "taylorshift", "performer",
                                      "dijiang", "spectraformer"};
  ASSERT_EQ(j["order"].get<std::vector<std::string>>(), want);
  EXPECT_EQ(j["sequences"].get<int64_t>(), 16);
  for (const char* k : {"mse_before_wo", "relmse_before_wo", "mse_after_wo", "relmse_after_wo"}) {
    EXPECT_EQ(j["methods"]["softmax"][k].get<double>(), 0.0) << k;
    for (const auto& m : want) {
      const double v = j["methods"][m][k].get<double>();
      EXPECT_TRUE(std::isfinite(v) && v >= 0) << m << " " << k;
      if (m != "softmax") EXPECT_GT(v, 0.0) << m << " " << k;
    }
  }
  EXPECT_EQ(j["methods"]["oal"]["layers"].size(), 5u);
  // Issue 12 defaults: mean-abs grouping on prompts after blocks 0..25 (26 × 256 tokens).
  EXPECT_EQ(j["chi_statistic"], "mean-abs");
  EXPECT_NE(j["grouping_prompts"].get<std::string>().find("after the first 6656 tokens"),
            std::string::npos)
      << j["grouping_prompts"];
  EXPECT_EQ(oal::attn::read_kernels(run / "groups.json").meta["grouping"]["chi_statistic"],
            "mean-abs");
  for (const char* f : {"analysis.json", "groups.json", "calibration.json", "kernels-oal.json",
                        "kernels-global.json", "baselines.safetensors", "fidelity.json"})
    EXPECT_TRUE(fs::exists(run / f)) << f;

  // `oal fidelity` on the written run reproduces the numbers.
  Result f = run_oal("fidelity --model '" + model.string() + "' --text '" + text.string() +
                         "' --calib '" + run.string() + "' --ctx 256 --quiet --json --out '" +
                         (dir / "f.json").string() + "'",
                     dir);
  ASSERT_EQ(f.status, 0) << f.err;
  const auto jf = nlohmann::json::parse(f.out);
  for (const auto& m : want)
    EXPECT_NEAR(jf["methods"][m]["relmse_before_wo"].get<double>(),
                j["methods"][m]["relmse_before_wo"].get<double>(),
                1e-6 * (1 + j["methods"][m]["relmse_before_wo"].get<double>()))
        << m;

  // `oal diagnose` (reduced: 2 seeds, 20 controls, 2 layers) gives ratios and p-values.
  Result d = run_oal("diagnose --model '" + model.string() + "' --text '" + text.string() +
                         "' --groups '" + (run / "groups.json").string() +
                         "' --layers 1,3 --seeds 2 --controls 20 --bootstrap 100 --quiet --json",
                     dir);
  ASSERT_EQ(d.status, 0) << d.err;
  const auto jd = nlohmann::json::parse(d.out);
  ASSERT_EQ(jd["rows"].size(), 4u);
  for (const auto& row : jd["rows"]) {
    EXPECT_GT(row["retained_ratio"].get<double>(), 0.0);
    const double p = row["p_value"].get<double>();
    EXPECT_GE(p, 1.0 / 21.0 - 1e-12);
    EXPECT_LE(p, 1.0);
  }
  fs::remove_all(dir);
}

TEST(CliCalibration, BadSplitAndMissingRunFail) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const fs::path dir = temp_dir("errors");
  Result r = run_oal("calibrate --model '" + model.string() + "' --text '" + text.string() +
                         "' --methods taylorshift --val-blocks 20-21 --out '" +
                         (dir / "x").string() + "' --quiet",
                     dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("block_split"), std::string::npos) << r.err;
  Result f = run_oal("fidelity --model '" + model.string() + "' --text '" + text.string() +
                         "' --calib '" + (dir / "nothing").string() + "' --quiet",
                     dir);
  EXPECT_EQ(f.status, 1);
  EXPECT_NE(f.err.find("calibration.json"), std::string::npos) << f.err;
  fs::remove_all(dir);
}

TEST(CliCalibration, FitsOnSmolLM2AreTheSameFromRunToRunAndAtAnyThreadCount) {
  // Issue 25 item 9: SmolLM2's Table 2 rows for the learned global kernel and SpectraFormer
  // changed between runs. The cause: the automatic GEMM rule times oal's own GEMM against
  // BLAS once per process, the two round differently, and a fit amplifies the rounding
  // over its updates. The fitting commands now pin the own GEMM (main.cpp), whose sums do
  // not depend on the thread count. So two runs — one thread and two, the GEMM left to the
  // command — and a run with the GEMM named must write the same bytes. A real d = 64
  // layer at a reduced budget (20 updates, ctx 256) keeps it to seconds.
  const fs::path model = oal::test::model_cache_file("SmolLM2-135M-Instruct.Q4_1.gguf");
  OAL_REQUIRE_PATH(model, "SmolLM2 GGUF (scripts/fetch-models.sh)");
  const auto text = OAL_REQUIRE_SHARED_FILE("wikitext2-test.raw");
  const fs::path dir = temp_dir("reproducible");
  auto args = [&](const std::string& out) {
    return "calibrate --model '" + model.string() + "' --text '" + text.string() +
           "' --methods global,spectraformer --layers 15 --ctx 256 --train-blocks 16-17 "
           "--val-blocks 24 --max-updates 20 --val-every 10 --quiet --out '" +
           (dir / out).string() + "'";
  };
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"one-thread", "OAL_THREADS=1 OAL_GEMM="},
      {"two-threads", "OAL_THREADS=2 OAL_GEMM="},
      {"own-named", "OAL_THREADS=2 OAL_GEMM=own"}};
  for (const auto& [out, env] : runs) {
    const Result r = run_oal(args(out), dir, env);
    ASSERT_EQ(r.status, 0) << out << ": " << r.err;
  }
  for (const char* f : {"kernels-global.json", "baselines.safetensors"}) {
    const std::string first = oal::test::read_file(dir / "one-thread" / f);
    ASSERT_FALSE(first.empty()) << f;
    for (const char* other : {"two-threads", "own-named"})
      EXPECT_TRUE(first == oal::test::read_file(dir / other / f)) << f << " differs in " << other;
  }
  fs::remove_all(dir);
}

TEST(CliCalibration, LinearizeResumesWhatARunFinishedAndRefusesOtherSettings) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const fs::path dir = temp_dir("resume"), run = dir / "run";
  auto args = [&](const std::string& extra) {
    return "linearize --model '" + model.string() + "' --text '" + text.string() +
           "' --layers 1-2 --ctx 128 --bootstrap 50 --max-updates 20 --val-every 10 "
           "--patience 20 --quiet --json --out '" + run.string() + "' " + extra;
  };
  Result first = run_oal(args(""), dir);
  ASSERT_EQ(first.status, 0) << first.err;
  const auto j1 = nlohmann::json::parse(first.out);
  EXPECT_TRUE(j1["resumed"].empty());
  const std::string calibration = oal::test::read_file(run / "calibration.json");
  const std::string kernels = oal::test::read_file(run / "kernels-oal.json");

  // Everything finished: analysis and calibration are read back, not refitted (the
  // calibration's files keep their bytes), and fidelity comes out the same up to the
  // kernel JSON's decimal round trip (as `oal fidelity` on the run, above).
  Result again = run_oal(args("--resume"), dir);
  ASSERT_EQ(again.status, 0) << again.err;
  const auto j2 = nlohmann::json::parse(again.out);
  EXPECT_EQ(j2["resumed"], nlohmann::json({"analysis", "calibration"}));
  EXPECT_EQ(oal::test::read_file(run / "calibration.json"), calibration);
  EXPECT_EQ(oal::test::read_file(run / "kernels-oal.json"), kernels);
  for (const std::string m : {"oal", "global", "spectraformer"}) {
    const double a = j1["methods"][m]["relmse_before_wo"].get<double>();
    EXPECT_NEAR(j2["methods"][m]["relmse_before_wo"].get<double>(), a, 1e-6 * (1 + a)) << m;
  }

  // A run stopped during its fits left no calibration.json (it is written last): the
  // resumed run reads the analysis back and fits again, to the same coefficients.
  fs::remove(run / "calibration.json");
  Result refit = run_oal(args("--resume"), dir);
  ASSERT_EQ(refit.status, 0) << refit.err;
  EXPECT_EQ(nlohmann::json::parse(refit.out)["resumed"], nlohmann::json({"analysis"}));
  EXPECT_EQ(oal::test::read_file(run / "kernels-oal.json"), kernels);

  // Other settings are refused, naming the setting; nothing is overwritten.
  Result other = run_oal(args("--resume --prompts 30"), dir);
  EXPECT_EQ(other.status, 1);
  EXPECT_NE(other.err.find("'prompts' is 40 there and 30 now"), std::string::npos)
      << other.err;
  EXPECT_EQ(oal::test::read_file(run / "kernels-oal.json"), kernels);
  fs::remove_all(dir);
}

// Windowed layers end to end on stories260K: linearize beside a window (oal, global and
// the windowed-only method, fitted jointly with c_h), the layers scored by their weight
// beyond the window, the two least-attending converted (auto:2) from the run, and the
// converted model scored by `oal ppl`, then adapted with LoRA (c_h trained with the
// kernel, the export windowed again). A feature-map baseline (TaylorShift) is fitted
// beside the same window, converted and scored too. The balance of a windowed conversion
// is chosen by the converted model's perplexity (convert --balance-text), also for the
// adapted model (a converted --model is its own run).
TEST(CliCalibration, WindowedLinearizeScoreConvertAndPerplexity) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const fs::path dir = temp_dir("windowed"), run = dir / "run";
  const std::string common = " --model '" + model.string() + "' --text '" + text.string() + "' --ctx 128";
  Result lin = run_oal("linearize" + common + " --layers 1-3 --bootstrap 50 --max-updates 20 "
                       "--val-every 10 --patience 20 --sinks 2 --window 8 "
                       "--methods softmax,oal,global,window,taylorshift --quiet --json --out '" +
                       run.string() + "'", dir);
  ASSERT_EQ(lin.status, 0) << lin.err;
  const auto j = nlohmann::json::parse(lin.out);
  auto order = j["order"].get<std::vector<std::string>>();
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, (std::vector<std::string>{"global", "oal", "softmax", "taylorshift", "window"}));
  EXPECT_EQ(j["sinks"], 2);
  EXPECT_EQ(j["window"], 8);
  for (const char* m : {"oal", "global", "window", "taylorshift"}) {
    const double rel = j["methods"][m]["relmse_before_wo"].get<double>();
    EXPECT_TRUE(rel > 0 && rel < 1) << m << " " << rel;
  }
  EXPECT_TRUE(fs::exists(run / "window.safetensors"));

  Result scores = run_oal("layer-scores" + common + " --blocks 0-3 --sinks 2 --window 8 --quiet --json --out '" +
                          (dir / "scores.json").string() + "'", dir);
  ASSERT_EQ(scores.status, 0) << scores.err;
  const auto sj = nlohmann::json::parse(scores.out);
  ASSERT_EQ(sj["layers"].size(), 5u);
  for (const auto& l : sj["layers"]) {
    const double m = l["mass_beyond_window"].get<double>();
    EXPECT_TRUE(m >= 0 && m <= 1) << m;
  }

  Result conv = run_oal("convert --model '" + model.string() + "' --calib '" + run.string() +
                        "' --method oal --layers auto:2 --layer-scores '" + (dir / "scores.json").string() +
                        "' --json --out '" + (dir / "conv").string() + "'", dir);
  ASSERT_EQ(conv.status, 0) << conv.err;
  const auto cj = nlohmann::json::parse(conv.out);
  EXPECT_EQ(cj["layers"].size(), 2u);
  EXPECT_NE(cj["layer_range"].get<std::string>().find("auto"), std::string::npos);
  for (const auto& l : cj["layers"]) EXPECT_TRUE(l.get<int64_t>() >= 1 && l.get<int64_t>() <= 3) << l;

  Result ppl = run_oal("ppl --model '" + (dir / "conv").string() + "' --text '" + text.string() +
                       "' --ctx 128 --max-blocks 2 --quiet --json", dir);
  ASSERT_EQ(ppl.status, 0) << ppl.err;
  const double p = nlohmann::json::parse(ppl.out)["ppl"].get<double>();
  EXPECT_TRUE(std::isfinite(p) && p > 1) << p;

  // The balance chosen by the converted model's perplexity on blocks 10-11: one score per
  // candidate, the lowest chosen, and the exported model scores what the chosen one did.
  Result bal = run_oal("convert --model '" + model.string() + "' --calib '" + run.string() +
                       "' --method oal --layers 1-3 --balance-text '" + text.string() +
                       "' --balance-ctx 128 --balance-blocks 10-11 --balance-offsets 0,2 --quiet "
                       "--json --out '" + (dir / "conv_b").string() + "'", dir);
  ASSERT_EQ(bal.status, 0) << bal.err;
  const auto bj = nlohmann::json::parse(bal.out)["balance"];
  ASSERT_EQ(bj["scores"].size(), 3u);
  EXPECT_EQ(bj["scores"][2]["candidate"], "window-only");
  size_t lowest = 0;
  for (size_t i = 1; i < 3; ++i)
    if (bj["scores"][i]["nll"].get<double>() < bj["scores"][lowest]["nll"].get<double>()) lowest = i;
  EXPECT_EQ(bj["chosen"], bj["scores"][lowest]["candidate"]);
  Result ppl_b = run_oal("ppl --model '" + (dir / "conv_b").string() + "' --text '" + text.string() +
                         "' --ctx 128 --first-block 10 --max-blocks 2 --quiet --json", dir);
  ASSERT_EQ(ppl_b.status, 0) << ppl_b.err;
  // The same weights and c_h (written as fp32, read back exactly) through the same code.
  EXPECT_NEAR(nlohmann::json::parse(ppl_b.out)["nll"].get<double>(),
              bj["scores"][lowest]["nll"].get<double>(), 1e-9);
  // Without --balance-ctx: refused before anything is read or written.
  Result no_ctx = run_oal("convert --model '" + model.string() + "' --calib '" + run.string() +
                          "' --method oal --layers 1-3 --balance-text '" + text.string() +
                          "' --out '" + (dir / "conv_x").string() + "'", dir);
  EXPECT_NE(no_ctx.status, 0);
  EXPECT_NE(no_ctx.err.find("--balance-text needs --balance-ctx"), std::string::npos) << no_ctx.err;
  EXPECT_FALSE(fs::exists(dir / "conv_x"));

  // LoRA adaptation trains c_h with the kernel and exports windowed layers again.
  Result ft = run_oal("finetune --model '" + model.string() + "' --calib '" + run.string() +
                      "' --method oal --layers 1-3 --train '" + text.string() + "' --val '" + text.string() +
                      "' --train-blocks 40:60 --val-blocks 0:4 --steps 2 --ctx 128 --eval-every 2 --quiet --json --out '" +
                      (dir / "ft").string() + "'", dir);
  ASSERT_EQ(ft.status, 0) << ft.err;
  EXPECT_TRUE(fs::exists(dir / "ft" / "model" / "oal_attention" / "window.safetensors"));
  EXPECT_EQ(nlohmann::json::parse(oal::test::read_file(dir / "ft" / "model" / "oal_attention" / "calibration.json"))["window"], 8);

  // The adapted model rebalanced: a converted --model without --calib is its own run and
  // keeps its own layers. Offset 0 is the adapted model itself, so its score must equal
  // `oal ppl` of the adapted directory on the same blocks (same weights and c_h, read
  // back exactly, through the same code: 1e-9).
  const fs::path adapted = dir / "ft" / "model";
  Result rebal = run_oal("convert --model '" + adapted.string() + "' --balance-text '" + text.string() +
                         "' --balance-ctx 128 --balance-blocks 10-11 --balance-offsets 0,2 --quiet "
                         "--json --out '" + (dir / "ft_b").string() + "'", dir);
  ASSERT_EQ(rebal.status, 0) << rebal.err;
  const auto rj = nlohmann::json::parse(rebal.out);
  EXPECT_EQ(rj["layers"], (std::vector<int64_t>{1, 2, 3}));
  EXPECT_NE(rj["layer_range"].get<std::string>().find("converted model's own"), std::string::npos);
  Result ppl_ft = run_oal("ppl --model '" + adapted.string() + "' --text '" + text.string() +
                          "' --ctx 128 --first-block 10 --max-blocks 2 --quiet --json", dir);
  ASSERT_EQ(ppl_ft.status, 0) << ppl_ft.err;
  EXPECT_EQ(rj["balance"]["scores"][0]["candidate"], "offset 0");
  EXPECT_NEAR(rj["balance"]["scores"][0]["nll"].get<double>(),
              nlohmann::json::parse(ppl_ft.out)["nll"].get<double>(), 1e-9);
  // Another method than the directory's needs its own run: refused, nothing written.
  Result other_method = run_oal("convert --model '" + adapted.string() + "' --method global --out '" +
                                (dir / "ft_g").string() + "'", dir);
  EXPECT_NE(other_method.status, 0);
  EXPECT_NE(other_method.err.find("running 'oal': pass --method oal"), std::string::npos) << other_method.err;
  EXPECT_FALSE(fs::exists(dir / "ft_g"));

  // The windowed-only method needs no run: finetune takes its window from --sinks /
  // --window, and the layers from the scores (auto:K) as convert does.
  Result ftw = run_oal("finetune --model '" + model.string() + "' --method window --sinks 2 --window 8 "
                       "--layers auto:2 --layer-scores '" + (dir / "scores.json").string() +
                       "' --train '" + text.string() + "' --val '" + text.string() +
                       "' --train-blocks 40:60 --val-blocks 0:4 --steps 2 --ctx 128 --eval-every 2 --quiet --json --out '" +
                       (dir / "ftw").string() + "'", dir);
  ASSERT_EQ(ftw.status, 0) << ftw.err;
  const auto fwj = nlohmann::json::parse(ftw.out);
  EXPECT_EQ(fwj["method"], "window");
  EXPECT_EQ(fwj["layers"].size(), 2u);
  EXPECT_EQ(fwj["kernel_parameters"], 0);  // no kernel: LoRA only
  EXPECT_EQ(nlohmann::json::parse(oal::test::read_file(dir / "ftw" / "model" / "oal_attention" / "calibration.json"))["window"], 8);

  // Retrieval heads: scored on passkey probes, kept exact by finetune (auto:M), recorded
  // in the adapted model, which loads and scores.
  Result rs = run_oal("layer-scores" + common + " --blocks 0-3 --sinks 2 --window 8 --retrieval-probes 2 "
                      "--probe-length 256 --quiet --json --out '" + (dir / "rscores.json").string() + "'", dir);
  ASSERT_EQ(rs.status, 0) << rs.err;
  for (const auto& l : nlohmann::json::parse(rs.out)["layers"]) {
    ASSERT_EQ(l["retrieval"].size(), l["heads"].size());
    for (const auto& r : l["retrieval"]) EXPECT_TRUE(r.get<double>() >= 0 && r.get<double>() <= 1) << r;
  }
  Result fth = run_oal("finetune --model '" + model.string() + "' --method window --sinks 2 --window 8 "
                       "--layers 1-3 --layer-scores '" + (dir / "rscores.json").string() + "' --full-heads auto:2 "
                       "--train '" + text.string() + "' --val '" + text.string() +
                       "' --train-blocks 40:60 --val-blocks 0:4 --steps 2 --ctx 128 --eval-every 2 --quiet --json --out '" +
                       (dir / "fth").string() + "'", dir);
  ASSERT_EQ(fth.status, 0) << fth.err;
  const std::string kept = nlohmann::json::parse(fth.out)["full_heads"].get<std::string>();
  EXPECT_EQ(std::count(kept.begin(), kept.end(), ':'), 2) << kept;
  const auto fhc = nlohmann::json::parse(oal::test::read_file(dir / "fth" / "model" / "oal_attention" / "calibration.json"));
  int64_t stored = 0;
  for (const auto& l : fhc["layers"]) stored += l.contains("full_kv_heads") ? int64_t(l["full_kv_heads"].size()) : 0;
  EXPECT_EQ(stored, 2);
  Result fhp = run_oal("ppl --model '" + (dir / "fth" / "model").string() + "' --text '" + text.string() +
                       "' --ctx 128 --max-blocks 2 --quiet --json", dir);
  ASSERT_EQ(fhp.status, 0) << fhp.err;
  EXPECT_TRUE(std::isfinite(nlohmann::json::parse(fhp.out)["ppl"].get<double>()));

  // The windowed baseline from the same run: converted (its tau and c_h read back) and
  // scored.
  Result conv_t = run_oal("convert --model '" + model.string() + "' --calib '" + run.string() +
                          "' --method taylorshift --layers 1-3 --json --out '" +
                          (dir / "conv_t").string() + "'", dir);
  ASSERT_EQ(conv_t.status, 0) << conv_t.err;
  Result ppl_t = run_oal("ppl --model '" + (dir / "conv_t").string() + "' --text '" + text.string() +
                         "' --ctx 128 --max-blocks 2 --quiet --json", dir);
  ASSERT_EQ(ppl_t.status, 0) << ppl_t.err;
  const double pt = nlohmann::json::parse(ppl_t.out)["ppl"].get<double>();
  EXPECT_TRUE(std::isfinite(pt) && pt > 1) << pt;
  // Converted again from itself, a baseline keeps its stored parameters (not its initial
  // ones): the same perplexity, exactly as above.
  Result again_t = run_oal("convert --model '" + (dir / "conv_t").string() +
                           "' --method taylorshift --json --out '" + (dir / "conv_t2").string() + "'", dir);
  ASSERT_EQ(again_t.status, 0) << again_t.err;
  Result ppl_t2 = run_oal("ppl --model '" + (dir / "conv_t2").string() + "' --text '" + text.string() +
                          "' --ctx 128 --max-blocks 2 --quiet --json", dir);
  ASSERT_EQ(ppl_t2.status, 0) << ppl_t2.err;
  EXPECT_NEAR(nlohmann::json::parse(ppl_t2.out)["nll"].get<double>(),
              nlohmann::json::parse(ppl_t.out)["nll"].get<double>(), 1e-9);
  fs::remove_all(dir);
}
