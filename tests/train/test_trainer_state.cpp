// The trainer's state.json bookkeeping (train/trainer_state.h): a round trip keeps every
// field; a state.json a user or a crash mangled is an oal::Error naming the file and the
// field, never a JSON library exception or an out-of-range cast (fuzz/fuzz_checkpoint
// reads state.json through the same function).
#include <gtest/gtest.h>

#include <string>

#include "oal/core/error.h"
#include "oal/train/trainer_state.h"

namespace {

using nlohmann::json;
using oal::train::TrainerState;

TrainerState sample() {
  return {{{"rank", 2}, {"lr", 5e-4}}, {{1, 2.7, 1e-4, 0.5}, {2, 2.6, 2e-4, 0.4}},
          {{0, 2.9}, {2, 2.5}}, 2, 2.5, 2, true};
}

// The message of the oal::Error reading `j` throws.
std::string error_of(const json& j) {
  try {
    oal::train::trainer_state_from_json(j, "run/state.json");
  } catch (const oal::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an oal::Error: ") + e.what();
  }
  return "no error";
}

void expect_error(const json& j, const std::string& expected) {
  const std::string m = error_of(j);
  EXPECT_EQ(m.rfind("[finetune] run/state.json", 0), 0u) << m;
  EXPECT_NE(m.find(expected), std::string::npos) << m;
}

}  // namespace

TEST(TrainerState, RoundTripKeepsEveryField) {
  const TrainerState s = sample();
  const TrainerState back =
      oal::train::trainer_state_from_json(oal::train::trainer_state_to_json(s), "state.json");
  EXPECT_EQ(back.signature, s.signature);
  ASSERT_EQ(back.steps_log.size(), 2u);
  EXPECT_EQ(back.steps_log[1].step, 2);
  EXPECT_DOUBLE_EQ(back.steps_log[1].loss, 2.6);
  EXPECT_DOUBLE_EQ(back.steps_log[1].lr, 2e-4);
  EXPECT_DOUBLE_EQ(back.steps_log[1].grad_norm, 0.4);
  ASSERT_EQ(back.val_log.size(), 2u);
  EXPECT_EQ(back.val_log[1].step, 2);
  EXPECT_DOUBLE_EQ(back.val_log[1].nll, 2.5);
  EXPECT_EQ(back.best_step, 2);
  EXPECT_DOUBLE_EQ(back.best_val_nll, 2.5);
  EXPECT_EQ(back.improved_step, 2);
  EXPECT_TRUE(back.stopped_early);
}

TEST(TrainerState, FilesWithoutEarlyStoppingFieldsStillLoad) {
  json j = oal::train::trainer_state_to_json(sample());
  j.erase("improved_step");
  j.erase("stopped_early");
  const TrainerState back = oal::train::trainer_state_from_json(j, "state.json");
  EXPECT_EQ(back.improved_step, back.best_step);
  EXPECT_FALSE(back.stopped_early);
}

TEST(TrainerState, MalformedFieldsAreNamedErrors) {
  const json good = oal::train::trainer_state_to_json(sample());
  expect_error(json::array(), "missing field 'signature'");
  auto bad = good;
  bad.erase("history");
  expect_error(bad, "missing field 'history'");
  bad = good;
  bad["best_step"] = 3.5e32;
  expect_error(bad, "best_step must be an integer, got a non-integer number");
  bad = good;
  bad["improved_step"] = "2";
  expect_error(bad, "improved_step must be an integer, got a string");
  bad = good;
  bad["best_val_nll"] = "low";
  expect_error(bad, "best_val_nll must be a number");
  bad = good;
  bad["stopped_early"] = 1;
  expect_error(bad, "stopped_early must be true or false");
  bad = good;
  bad["history"]["steps"] = 5;
  expect_error(bad, "must be lists");
  bad = good;
  bad["history"]["steps"][0] = {1, 2.7};  // a short row: reading r[3] would be out of range
  expect_error(bad, "history.steps: each entry must be a list of 4 numbers");
  bad = good;
  bad["history"]["val"][1][0] = -1e300;
  expect_error(bad, "history.val step must be an integer");
  bad = good;
  bad["history"]["val"][1][1] = nullptr;  // NaN is written as null by nlohmann
  expect_error(bad, "history.val must be a number, got null");
}
