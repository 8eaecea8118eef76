// Calibration spread over processes (issue: multi-process through c10d): two and three
// local ranks (`--nproc`, Gloo over 127.0.0.1; three ranks for two blocks leave one rank idle)
// and two shards merged afterwards must write the same bytes as one process; a lost rank
// is an error naming it, and no run directory is left. Reduced fits (20 updates, layers
// 1-2, ctx 128) keep each run to seconds.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "common/shared_data.h"
#include "oal/io/safetensors.h"

namespace fs = std::filesystem;
using oal::test::read_file;
using oal::test::run_oal;
using oal::test::temp_dir;

namespace {

// Every method that needs no groups file, so the test needs no analysis step.
struct Data {
  fs::path model, text;
};

std::string calibrate_args(const Data& d, const fs::path& out, const std::string& extra = "") {
  const auto& [model, text] = d;
  return "calibrate --model '" + model.string() + "' --text '" + text.string() +
         "' --methods softmax,global,taylorshift,performer,dijiang,spectraformer --layers 1-2 "
         "--ctx 128 --max-updates 20 --val-every 10 --quiet --out '" + out.string() + "' " + extra;
}

// The same files in both runs, byte for byte (`expected` must be among them).
void expect_same_run(const fs::path& a, const fs::path& b,
                     const std::vector<std::string>& expected = {"kernels-global.json",
                                                                 "baselines.safetensors",
                                                                 "calibration.json"}) {
  std::set<std::string> in_a, in_b;
  for (const auto& e : fs::directory_iterator(a)) in_a.insert(e.path().filename().string());
  for (const auto& e : fs::directory_iterator(b)) in_b.insert(e.path().filename().string());
  EXPECT_EQ(in_a, in_b) << a << " and " << b << " hold different files";
  for (const std::string& f : expected) EXPECT_TRUE(in_a.count(f)) << f << " missing in " << a;
  for (const std::string& f : in_a)
    if (in_b.count(f))
      EXPECT_TRUE(read_file(a / f) == read_file(b / f))
          << f << " differs between " << a << " and " << b;
}

TEST(CliDistributed, TwoRanksAndTwoShardsWriteTheSameRunAsOneProcess) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const Data d{model, text};
  const fs::path dir = temp_dir("dist");
  auto r = run_oal(calibrate_args(d, dir / "one"), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_oal(calibrate_args(d, dir / "two", "--nproc 2"), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_same_run(dir / "one", dir / "two");
  // Three ranks for one training and one validation block: rank 2 captures nothing.
  const std::string two_blocks = "--train-blocks 16 --val-blocks 24";
  r = run_oal(calibrate_args(d, dir / "one-small", two_blocks), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_oal(calibrate_args(d, dir / "three", two_blocks + " --nproc 3"), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_same_run(dir / "one-small", dir / "three");

  for (int i = 0; i < 2; ++i) {
    r = run_oal(calibrate_args(d, dir / ("s" + std::to_string(i)), "--shard " + std::to_string(i) + "/2"), dir);
    ASSERT_EQ(r.status, 0) << r.err;
  }
  r = run_oal("merge-calibration '" + (dir / "s1").string() + "' '" + (dir / "s0").string() +
                  "' --out '" + (dir / "merged").string() + "'",
              dir);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_same_run(dir / "one", dir / "merged");
  fs::remove_all(dir);
}

TEST(CliDistributed, WindowedShardsMergeToTheSameRunAsOneProcess) {
  // A windowed run also stores each layer's c_h (window.safetensors): a merge that
  // dropped it left a run that `oal convert` and `oal finetune --calib` refuse.
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const Data d{model, text};
  const fs::path dir = temp_dir("dist-window");
  const std::string windowed = "--sinks 2 --window 16";
  auto r = run_oal(calibrate_args(d, dir / "one", windowed), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  for (int i = 0; i < 2; ++i) {
    r = run_oal(calibrate_args(d, dir / ("s" + std::to_string(i)),
                               windowed + " --shard " + std::to_string(i) + "/2"),
                dir);
    ASSERT_EQ(r.status, 0) << r.err;
  }
  r = run_oal("merge-calibration '" + (dir / "s0").string() + "' '" + (dir / "s1").string() +
                  "' --out '" + (dir / "merged").string() + "'",
              dir);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_same_run(dir / "one", dir / "merged",
                  {"kernels-global.json", "baselines.safetensors", "window.safetensors",
                   "calibration.json"});
  fs::remove_all(dir);
}

TEST(CliDistributed, LinearizeOnTwoRanksWritesTheSameFilesAsOneProcess) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const fs::path dir = temp_dir("linearize");
  auto args = [&](const std::string& out) {
    return "linearize --model '" + model.string() + "' --text '" + text.string() +
           "' --layers 1-2 --ctx 128 --bootstrap 50 --max-updates 20 --val-every 10 --patience 20 "
           "--quiet --json --out '" + (dir / out).string() + "'";
  };
  auto r = run_oal(args("one"), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_oal(args("two") + " --nproc 2", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* f : {"analysis.json", "groups.json", "kernels-oal.json", "fidelity.json"})
    EXPECT_TRUE(read_file(dir / "one" / f) == read_file(dir / "two" / f)) << f;
  expect_same_run(dir / "one", dir / "two");
  fs::remove_all(dir);
}

TEST(CliDistributed, MismatchedOrMissingShardsAreRefused) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const Data d{model, text};
  const fs::path dir = temp_dir("shards");
  ASSERT_EQ(run_oal(calibrate_args(d, dir / "s0", "--shard 0/2"), dir).status, 0);
  ASSERT_EQ(run_oal(calibrate_args(d, dir / "s1", "--shard 1/2 --seed 7"), dir).status, 0);
  auto r = run_oal("merge-calibration '" + (dir / "s0").string() + "' --out '" + (dir / "m").string() + "'", dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("expected all 2 shards"), std::string::npos) << r.err;
  r = run_oal("merge-calibration '" + (dir / "s0").string() + "' '" + (dir / "s1").string() +
                  "' --out '" + (dir / "m").string() + "'",
              dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("'seed' differs"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "m"));
  r = run_oal(calibrate_args(d, dir / "x", "--shard 2/2"), dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("0 <= i < n"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(CliDistributed, ALostRankIsNamedAndNothingIsWritten) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const Data d{model, text};
  const fs::path dir = temp_dir("lost");
  auto r = run_oal(calibrate_args(d, dir / "run", "--nproc 2"), dir, "OAL_FAULT_EXIT_RANK=1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("rank 1 of 2"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "run"));
  fs::remove_all(dir);
}

// Data-parallel LoRA: 2 ranks each take half of every update's 4 blocks and sum their
// gradients; without dropout (masks are drawn per rank) the run equals one process up to
// summation order. Tolerance: the ranks' partial sums change the fp32 gradients at
// ~1e-7 relative; 6 Adam updates at lr 5e-4 keep the adapters within ~1e-6 and the
// validation NLL within ~1e-7 (measured 6e-8); 1e-5 leaves margin while a wrong batch
// split or an unreduced gradient moves them by 1e-3 or more.
TEST(CliDistributed, FinetuneOnTwoRanksMatchesOneProcessAndResumesOnOne) {
  const auto model = OAL_REQUIRE_SHARED_FILE("stories260K.bin");
  const auto text = OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const fs::path dir = temp_dir("ddp");
  auto args = [&](const std::string& out) {
    return "finetune --model '" + model.string() + "' --method softmax --train '" + text.string() +
           "' --val '" + text.string() + "' --train-blocks 58: --val-blocks 26:34 --steps 6 "
           "--batch 4 --dropout 0 --eval-every 3 --ctx 64 --quiet --json --out '" + (dir / out).string() + "'";
  };
  auto one = run_oal(args("one"), dir);
  ASSERT_EQ(one.status, 0) << one.err;
  auto two = run_oal(args("two") + " --nproc 2", dir);
  ASSERT_EQ(two.status, 0) << two.err;
  const auto a = nlohmann::json::parse(one.out), b = nlohmann::json::parse(two.out);
  ASSERT_EQ(a["val"].size(), 3u);
  ASSERT_EQ(b["val"].size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(a["val"][i]["nll"].get<double>(), b["val"][i]["nll"].get<double>(), 1e-5) << i;
  EXPECT_LT(a["val"][2]["nll"].get<double>(), a["val"][0]["nll"].get<double>());  // it learned
  // Interrupted after update 3 on 2 ranks, resumed on 1: the same run (any world size
  // can resume, the checkpoint holds the whole replicated state).
  auto cut = run_oal(args("cut") + " --nproc 2", dir, "OAL_FAULT_EXIT_AFTER_STEP=3");
  EXPECT_NE(cut.status, 0);
  auto resumed = run_oal(args("cut") + " --resume", dir);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  const auto c = nlohmann::json::parse(resumed.out);
  EXPECT_EQ(c["resumed_from"].get<int64_t>(), 3);
  EXPECT_NEAR(c["val"][2]["nll"].get<double>(), a["val"][2]["nll"].get<double>(), 1e-5);

  const auto ta = oal::io::read_safetensors(dir / "one/adapter/adapter_model.safetensors").tensors;
  const auto tb = oal::io::read_safetensors(dir / "two/adapter/adapter_model.safetensors").tensors;
  ASSERT_EQ(ta.size(), tb.size());
  for (const auto& [name, t] : ta) {
    ASSERT_TRUE(tb.count(name)) << name;
    EXPECT_LT((t.to(at::kDouble) - tb.at(name).to(at::kDouble)).abs().max().item<double>(), 1e-5) << name;
  }
  fs::remove_all(dir);
}

}  // namespace
