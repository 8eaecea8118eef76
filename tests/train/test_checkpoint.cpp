// Checkpoints: round trip, pointer files, pruning, and crash safety (a fault injected
// at every stage of a save leaves the previous checkpoint loadable).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "oal/core/error.h"
#include "oal/train/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using namespace oal::train;

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("oal_ckpt_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

Checkpoint make(int64_t step) {
  Checkpoint c;
  c.step = step;
  c.tensors["w"] = at::full({2, 2}, double(step), at::kFloat);
  c.optimizer_state = "opt-" + std::to_string(step);
  c.state["best_val_nll"] = 1.0 / double(step + 1);
  return c;
}

TEST(Checkpoint, RoundTripAndPointers) {
  auto d = fresh_dir("rt");
  EXPECT_FALSE(load_checkpoint(d).has_value());
  save_checkpoint(d, make(1), true, 2.5);
  save_checkpoint(d, make(2), false, 3.0);
  auto last = load_checkpoint(d, "last");
  ASSERT_TRUE(last);
  EXPECT_EQ(last->step, 2);
  EXPECT_TRUE(at::equal(last->tensors.at("w"), at::full({2, 2}, 2.0, at::kFloat)));
  EXPECT_EQ(last->optimizer_state, "opt-2");
  EXPECT_DOUBLE_EQ(last->state["best_val_nll"].get<double>(), 1.0 / 3.0);
  auto best = load_checkpoint(d, "best");
  ASSERT_TRUE(best);
  EXPECT_EQ(best->step, 1);
  // step 3 becomes best: step 1 and step 2 are pruned.
  save_checkpoint(d, make(3), true, 1.0);
  EXPECT_FALSE(fs::exists(d / "checkpoints/step-000001"));
  EXPECT_FALSE(fs::exists(d / "checkpoints/step-000002"));
  EXPECT_TRUE(fs::exists(d / "checkpoints/step-000003"));
  fs::remove_all(d);
}

TEST(Checkpoint, CrashAtAnyStageLeavesPreviousCheckpointLoadable) {
  for (const char* stage : {"tensors", "optimizer", "state", "renamed"}) {
    auto d = fresh_dir(std::string("crash_") + stage);
    save_checkpoint(d, make(5), true, 1.0);
    auto hook = [&](std::string_view s) {
      if (s == stage) throw std::runtime_error("simulated kill");
    };
    EXPECT_THROW(save_checkpoint(d, make(6), false, 0.0, hook), std::runtime_error) << stage;
    auto last = load_checkpoint(d);
    ASSERT_TRUE(last) << stage;
    EXPECT_EQ(last->step, 5) << stage;
    EXPECT_TRUE(at::equal(last->tensors.at("w"), at::full({2, 2}, 5.0, at::kFloat)));
    // The next save succeeds and cleans up what the crash left.
    save_checkpoint(d, make(7), false, 0.0);
    EXPECT_EQ(load_checkpoint(d)->step, 7);
    EXPECT_EQ(load_checkpoint(d, "best")->step, 5);
    int dirs = 0;
    for (auto& e : fs::directory_iterator(d / "checkpoints")) dirs += e.is_directory();
    EXPECT_EQ(dirs, 2) << stage;  // step 5 (best) and step 7 (last), no *.tmp left
    fs::remove_all(d);
  }
}

TEST(Checkpoint, CrashAfterLastPointerKeepsNewCheckpoint) {
  auto d = fresh_dir("after_last");
  save_checkpoint(d, make(1), true, 1.0);
  auto hook = [](std::string_view s) {
    if (s == "last") throw std::runtime_error("simulated kill");
  };
  EXPECT_THROW(save_checkpoint(d, make(2), true, 0.5, hook), std::runtime_error);
  EXPECT_EQ(load_checkpoint(d)->step, 2);
  EXPECT_EQ(load_checkpoint(d, "best")->step, 1);  // best.json not yet rewritten
  fs::remove_all(d);
}

}  // namespace

// Found by fuzz/fuzz_checkpoint: last.json naming a path too long for the file system
// made std::filesystem throw filesystem_error instead of an oal::Error; pointers that
// leave the run directory are refused as well.
TEST(Checkpoint, HostilePointerFilesAreNamedErrors) {
  const fs::path dir = fresh_dir("hostile_pointer");
  const auto expect_error = [&](const std::string& pointer, const std::string& expected) {
    std::ofstream(dir / "last.json") << pointer;
    try {
      load_checkpoint(dir, "last");
      ADD_FAILURE() << pointer << " loaded";
    } catch (const oal::Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  expect_error("{\"dir\": \"checkpoints/" + std::string(5000, '5') + "\"}", "not a directory");
  expect_error(R"({"dir": "/etc"})", "inside the run directory");
  expect_error(R"({"dir": "checkpoints/../../elsewhere"})", "inside the run directory");
  expect_error(R"({"dir": ""})", "inside the run directory");
  expect_error(R"({"dir": "checkpoints/step-000404"})", "not a directory");
  fs::remove_all(dir);
}
