// `oal tokenize` / `oal detokenize` of the built binary: ids against the independent
// references in ../shared/data/tokenizer-references.json, round trips, output formats
// and errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/shared_data.h"

namespace fs = std::filesystem;

namespace {

struct CliResult {
  int status = -1;
  std::string out, err;
};

fs::path temp_dir() {
  auto d = fs::temp_directory_path() /
           ("oal_cli_text_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

CliResult oal_run(const std::string& args) {
  const fs::path dir = temp_dir();
  const std::string cmd = std::string("'") + OAL_CLI_PATH + "' " + args + " >" +
                          q(dir / "out") + " 2>" + q(dir / "err");
  const int raw = std::system(cmd.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(dir / "out"), slurp(dir / "err")};
}

// Three reference strings of one tokenizer (the first two and the last; the library's
// tests check them all), each tokenized from a file (the texts hold quotes, tabs,
// CRLF), then detokenized back: the CLI passes bytes through unchanged.
void check_references(const std::string& key, const fs::path& tokenizer) {
  auto refs = OAL_REQUIRE_SHARED_FILE("tokenizer-references.json");
  const auto all = nlohmann::json::parse(slurp(refs)).at(key);
  ASSERT_GE(all.size(), 3u);
  const fs::path dir = temp_dir();
  for (size_t i : {size_t{0}, size_t{1}, all.size() - 1}) {
    const std::string text = all[i].at("text");
    const auto want = all[i].at("ids").get<std::vector<int32_t>>();
    write(dir / "text", text);
    const CliResult r = oal_run("tokenize --tokenizer " + q(tokenizer) + " --file " +
                                q(dir / "text") + " --json --ids-only");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("ids").get<std::vector<int32_t>>(), want) << key << ": " << text;
    EXPECT_FALSE(j.contains("pieces"));
    write(dir / "ids", nlohmann::json(want).dump());  // "[1,2,3]"
    const CliResult d = oal_run("detokenize --tokenizer " + q(tokenizer) + " --file " +
                                q(dir / "ids") + " --json");
    ASSERT_EQ(d.status, 0) << d.err;
    EXPECT_EQ(nlohmann::json::parse(d.out).at("text"), text) << key;
  }
}

}  // namespace

TEST(CliText, HelpForBothCommands) {
  for (const char* cmd : {"tokenize", "detokenize"}) {
    const CliResult r = oal_run(std::string(cmd) + " --help");
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.out.find("--tokenizer"), std::string::npos) << cmd;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << cmd;
  }
}

TEST(CliText, QwenReferencesRoundTrip) {
  auto tok = OAL_REQUIRE_SHARED_FILE("qwen-tokenizer/tokenizer.json");
  check_references("qwen", tok);
}

TEST(CliText, Llama3ReferencesRoundTrip) {
  auto tok = OAL_REQUIRE_SHARED_FILE("llama3-tokenizer");  // a directory holding tokenizer.json
  check_references("llama3", tok);
}

TEST(CliText, Llama2cTextAndIdFormats) {
  auto tok = OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const CliResult ids = oal_run("tokenize --tokenizer " + q(tok) +
                                " --text 'Once upon a time' --bos --ids-only");
  ASSERT_EQ(ids.status, 0) << ids.err;
  ASSERT_EQ(ids.out.rfind("[1, ", 0), 0u) << ids.out;  // BOS first, Python-list style
  ASSERT_EQ(ids.out.back(), '\n');
  const CliResult text = oal_run("tokenize --tokenizer " + q(tok) + " --text 'Once upon a time'");
  ASSERT_EQ(text.status, 0) << text.err;
  // One line per token: right-aligned id, arrow, quoted piece; the pieces spell the text
  // (decoded as `detokenize` would: concatenated, they are the text).
  std::string joined;
  size_t lines = 0;
  for (size_t at = 0; at < text.out.size(); ++lines) {
    const size_t end = text.out.find('\n', at);
    const std::string line = text.out.substr(at, end - at);
    const size_t open = line.find(" -> '");
    ASSERT_NE(open, std::string::npos) << line;
    joined += line.substr(open + 5, line.size() - open - 6);
    at = end + 1;
  }
  EXPECT_EQ(joined, "Once upon a time");  // decode drops the dummy-prefix space
  const CliResult back = oal_run("detokenize --tokenizer " + q(tok) + " --ids '" +
                                 ids.out.substr(0, ids.out.size() - 1) + "'");
  ASSERT_EQ(back.status, 0) << back.err;
  EXPECT_EQ(back.out, "Once upon a time\n");
  // "é" is not in the 512-token vocabulary: two byte tokens, each half a character,
  // printed as escapes.
  const CliResult bytes = oal_run("tokenize --tokenizer " + q(tok) + " --text 'é'");
  ASSERT_EQ(bytes.status, 0) << bytes.err;
  EXPECT_NE(bytes.out.find("-> '\\xC3'"), std::string::npos) << bytes.out;
  EXPECT_NE(bytes.out.find("-> '\\xA9'"), std::string::npos) << bytes.out;
  const auto j = nlohmann::json::parse(
      oal_run("tokenize --tokenizer " + q(tok) + " --text 'Once upon a time' --json").out);
  EXPECT_EQ(j.at("kind"), "llama2c");
  EXPECT_EQ(j.at("count"), j.at("ids").size());
  EXPECT_EQ(j.at("pieces").size(), j.at("ids").size());
}

TEST(CliText, ErrorsNameTheProblem) {
  auto tok = OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const CliResult none = oal_run("tokenize --tokenizer " + q(tok));
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("[tokenize] give exactly one of --text and --file"), std::string::npos)
      << none.err;
  const CliResult both = oal_run("tokenize --tokenizer " + q(tok) + " --text a --file b");
  EXPECT_NE(both.status, 0);
  const CliResult bad = oal_run("detokenize --tokenizer " + q(tok) + " --ids '1 2 x3'");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("[detokenize] 'x3' is not a token id"), std::string::npos) << bad.err;
  const CliResult range = oal_run("detokenize --tokenizer " + q(tok) + " --ids '1 999'");
  EXPECT_EQ(range.status, 1);
  EXPECT_NE(range.err.find("token id 999 is outside the vocabulary (0..511)"), std::string::npos)
      << range.err;
  const CliResult missing = oal_run("tokenize --tokenizer /nonexistent/tok.json --text a");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("[load tokenizer]"), std::string::npos) << missing.err;
}
