// Malformed calibration run directories (found by fuzz/fuzz_run_dir): whatever
// calibration.json holds, attn::read_method_store (which reads run directories and
// converted models' oal_attention/ alike) fails with oal::Error("[calibration_run] ...")
// naming the file, never with a JSON library exception.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "common/temp_dir.h"
#include "oal/attention/method_store.h"
#include "oal/calib/run_merge.h"
#include "oal/core/error.h"

namespace {

// What `fn` threw: an oal::Error's message, "not an oal::Error: ..." for any other
// exception, `success` when it returned.
std::string outcome(const std::function<void()>& fn, const std::string& success) {
  try {
    fn();
  } catch (const oal::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an oal::Error: ") + e.what();
  }
  return success;
}

// read_method_store over a directory whose calibration.json is `text`; the error message.
std::string read_run_error(const std::string& text) {
  const auto dir = oal::test::make_temp_dir("run_dir_inputs");
  oal::test::write_file(dir / "calibration.json", text);
  const std::string message = outcome([&] { oal::attn::read_method_store(dir); }, "no error");
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
  expect_named_error(R"({"format": "oal-calibration", "version": "1"})",
                     "'version' must be an integer, got a string");
}

TEST(RunDirInputs, MissingOrMistypedFields) {
  expect_named_error("{" + k_head + "}", "missing or of the wrong type");
  expect_named_error("{" + k_head + R"(, "methods": "oal", "seed": 1, "layers": []})",
                     "wrong type");
  expect_named_error("{" + k_head + R"(, "methods": [], "seed": "1", "layers": []})",
                     "'seed' must be a non-negative integer, got a string");
  expect_named_error("{" + k_head + R"(, "methods": ["softmax"], "seed": 1, "layers": [7]})",
                     "wrong type");
  expect_named_error("{" + k_head + R"(, "methods": ["softmax"], "seed": 1, "layers": {"a": 1}})",
                     "wrong type");
}

TEST(RunDirInputs, ValidMinimalRunStillLoads) {
  const auto dir = oal::test::make_temp_dir("run_dir_inputs");
  oal::test::write_file(dir / "calibration.json",
                        "{" + k_head + R"(, "methods": ["softmax"], "seed": 1, "layers": [{"layer": 0}]})");
  const auto run = oal::attn::read_method_store(dir);
  ASSERT_EQ(run.layers.size(), 1u);
  EXPECT_EQ(run.methods, std::vector<std::string>{"softmax"});
  std::filesystem::remove_all(dir);
}

// Integer fields holding floats: nlohmann's get<int64_t>() would cast them (3.5e32 is
// undefined behaviour); io::json_int refuses them with the field's name.
TEST(RunDirInputs, IntegerFieldsRejectFloats) {
  const std::string methods = R"("methods": ["softmax"], )";
  expect_named_error(R"({"format": "oal-calibration", "version": 1e300})",
                     "'version' must be an integer, got a non-integer number");
  expect_named_error("{" + k_head + ", " + methods + R"("seed": 7.5, "layers": []})",
                     "'seed' must be a non-negative integer, got a non-integer number");
  expect_named_error("{" + k_head + ", " + methods + R"("seed": -1, "layers": []})",
                     "'seed' must be a non-negative integer, got -1");
  expect_named_error("{" + k_head + ", " + methods + R"("seed": 1, "layers": [{"layer": 3.5e32}]})",
                     "layers[].layer must be an integer");
  expect_named_error("{" + k_head + R"(, "methods": ["performer"], "seed": 1,
                     "layers": [{"layer": 0, "q_heads": 1e300}]})",
                     "layers[].q_heads must be an integer");
}

namespace {

// merge_runs over one partial run (shard 0 of 1) whose calibration.json is `text`: the
// error message, or "merged" when it succeeded.
std::string merge_one(const std::string& text) {
  const auto dir = oal::test::make_temp_dir("run_merge_inputs");
  std::filesystem::create_directories(dir / "s0");
  oal::test::write_file(dir / "s0" / "calibration.json", text);
  const std::string message =
      outcome([&] { oal::calib::merge_runs({dir / "s0"}, dir / "out"); }, "merged");
  std::filesystem::remove_all(dir);
  return message;
}

// A one-shard run of the softmax method with `shard` and `fits` as given.
std::string shard_run(const std::string& shard, const std::string& fits = "[]") {
  return "{" + k_head + R"(, "methods": ["softmax"], "seed": 1, "layers": [{"layer": 0}], "fits": )" +
         fits + R"(, "shard": )" + shard + "}";
}

}  // namespace

TEST(RunMergeInputs, OneShardMergesAndMalformedShardsAreNamedErrors) {
  EXPECT_EQ(merge_one(shard_run(R"({"index": 0, "count": 1, "layers": [0]})")), "merged");
  auto expect = [](const std::string& text, const std::string& expected) {
    const std::string m = merge_one(text);
    EXPECT_EQ(m.rfind("[merge_calibration]", 0), 0u) << text << " -> " << m;
    EXPECT_NE(m.find(expected), std::string::npos) << text << " -> " << m;
  };
  expect(shard_run(R"({"index": 1e300, "count": 1, "layers": [0]})"),
         "shard.index must be an integer");
  expect(shard_run(R"({"index": 0, "count": 2.5, "layers": [0]})"),
         "shard.count must be an integer");
  expect(shard_run(R"({"index": 0, "count": 1, "layers": [0.5]})"),
         "shard.layers must be an integer");
  expect(shard_run(R"({"index": 0, "count": 1})"), "no 'layers' list");
  expect(shard_run(R"({"index": 0, "count": 1, "layers": [0]})", R"([{"method": "softmax", "layer": -9e99}])"),
         "fits[].layer must be an integer");
  expect(shard_run(R"({"index": 0, "count": 1, "layers": [0]})", R"([{"layer": 0}])"),
         "has no method name");
  expect(shard_run(R"({"index": 0, "count": 1, "layers": [0]})", "7"), "expected a list 'fits'");
  expect("[1]", "expected format oal-calibration version 1");
}
