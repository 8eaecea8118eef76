// Malformed calibration run directories (found by fuzz/fuzz_run_dir): whatever
// calibration.json holds, read_run fails with oal::Error("[calibration_run] ...") naming
// the file, never with a JSON library exception.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/temp_dir.h"
#include "oal/calib/run_dir.h"
#include "oal/core/error.h"

namespace {

// read_run over a directory whose calibration.json is `text`; the error message.
std::string read_run_error(const std::string& text) {
  const auto dir = oal::test::make_temp_dir("run_dir_inputs");
  oal::test::write_file(dir / "calibration.json", text);
  std::string message = "no error";
  try {
    oal::calib::read_run(dir);
  } catch (const oal::Error& e) {
    message = e.what();
  } catch (const std::exception& e) {
    message = std::string("not an oal::Error: ") + e.what();
  }
  std::filesystem::remove_all(dir);
  return message;
}

void expect_named_error(const std::string& text, const std::string& expected) {
  const std::string m = read_run_error(text);
  EXPECT_EQ(m.rfind("[calibration_run]", 0), 0u) << text << " -> " << m;
  EXPECT_NE(m.find("calibration.json"), std::string::npos) << text << " -> " << m;
  EXPECT_NE(m.find(expected), std::string::npos) << text << " -> " << m;
}

const std::string k_head = R"("format": "oal-calibration", "version": 1)";

}  // namespace

TEST(RunDirInputs, NotAnObject) {
  // The input the fuzzer found: a JSON array, then every other non-object.
  for (const char* text : {"[]", "[1, 2]", "42", "\"oal-calibration\"", "null", "true"})
    expect_named_error(text, "expected a JSON object");
}

TEST(RunDirInputs, WrongFormatOrVersion) {
  expect_named_error(R"({"format": "other", "version": 1})", "oal-calibration version 1");
  expect_named_error(R"({"format": 3, "version": 1})", "wrong type");
  expect_named_error(R"({"format": "oal-calibration", "version": "1"})", "wrong type");
}

TEST(RunDirInputs, MissingOrMistypedFields) {
  expect_named_error("{" + k_head + "}", "missing or of the wrong type");
  expect_named_error("{" + k_head + R"(, "methods": "oal", "seed": 1, "layers": []})",
                     "wrong type");
  expect_named_error("{" + k_head + R"(, "methods": [], "seed": "1", "layers": []})",
                     "wrong type");
  expect_named_error("{" + k_head + R"(, "methods": ["softmax"], "seed": 1, "layers": [7]})",
                     "wrong type");
  expect_named_error("{" + k_head + R"(, "methods": ["softmax"], "seed": 1, "layers": {"a": 1}})",
                     "wrong type");
}

TEST(RunDirInputs, ValidMinimalRunStillLoads) {
  const auto dir = oal::test::make_temp_dir("run_dir_inputs");
  oal::test::write_file(dir / "calibration.json",
                        "{" + k_head + R"(, "methods": ["softmax"], "seed": 1, "layers": [{"layer": 0}]})");
  const auto run = oal::calib::read_run(dir);
  ASSERT_EQ(run.layers.size(), 1u);
  EXPECT_EQ(run.methods, std::vector<std::string>{"softmax"});
  std::filesystem::remove_all(dir);
}
