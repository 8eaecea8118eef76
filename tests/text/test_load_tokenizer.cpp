// load_tokenizer dispatch and tokenizer.json validation on small synthetic files.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/shared_data.h"
#include "oal/core/error.h"
#include "oal/text/byte_level.h"
#include "oal/text/hf_bpe_tokenizer.h"
#include "oal/text/split_pattern.h"
#include "oal/text/tokenizer.h"
#include "common/temp_dir.h"

namespace oal::text {
namespace {

using json = nlohmann::json;

std::string bl(const std::string& bytes) { return bytes_to_byte_level(bytes); }

// A tiny byte-level BPE: ids 0..255 are the byte characters, then merges
// h+e (256), l+l (257), he+ll (258, array form), Ġ+w (259), Ġw+o (260).
json tiny_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bl(std::string(1, static_cast<char>(b)))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab[bl(" w")] = 259;
  vocab[bl(" wo")] = 260;
  json merges = json::array({"h e", "l l", json::array({"he", "ll"}), bl(" ") + " w", bl(" w") + " o"});
  json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}};
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", std::string(split_pattern_regex(SplitPattern::llama3))}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["added_tokens"] = json::array({{{"id", 300}, {"content", "<|eot|>"}, {"special", true}},
                                   {{"id", 301}, {"content", "<|e|>"}, {"special", true}},
                                   {{"id", 302}, {"content", "[S]"}, {"special", false}, {"lstrip", true}, {"rstrip", true}}});
  return j;
}

std::filesystem::path write_json(const std::filesystem::path& dir, const json& j, const std::string& name = "tokenizer.json") {
  const auto p = dir / name;
  oal::test::write_file(p, j.dump());
  return p;
}

void expect_load_error(const std::filesystem::path& path, const std::string& needle) {
  try {
    load_tokenizer(path);
    ADD_FAILURE() << "expected an oal::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(LoadTokenizer, TinyByteLevelBpe) {
  const auto dir = oal::test::make_temp_dir("load");
  const auto tok = load_tokenizer(write_json(dir, tiny_tokenizer()));
  EXPECT_EQ(tok->kind(), "hf-bpe");
  EXPECT_EQ(tok->vocab_size(), 303);
  // "hello": h e l l o -> he l l o -> he ll o -> hell o (ranks 0, 1, 2).
  EXPECT_EQ(tok->encode("hello", false), (std::vector<int32_t>{258, 'o'}));
  // " world" is one piece; Ġ w -> Ġw, Ġw o -> Ġwo, then r l d stay bytes.
  EXPECT_EQ(tok->encode("hello world", false), (std::vector<int32_t>{258, 'o', 260, 'r', 'l', 'd'}));
  // Added tokens: longest match first (<|eot|> not <|e|>), lstrip/rstrip swallow spaces.
  EXPECT_EQ(tok->encode("he<|eot|><|e|>", false), (std::vector<int32_t>{256, 300, 301}));
  EXPECT_EQ(tok->encode("he  [S]  he", false), (std::vector<int32_t>{256, 302, 256}));
  EXPECT_EQ(tok->decode({258, 'o', 300}), "hello<|eot|>");
  EXPECT_EQ(tok->token_string(259), "\xC4\xA0w");
  EXPECT_EQ(tok->token_id("<|e|>"), 301);
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_EQ(tok->eos_id(), -1);
  EXPECT_THROW(tok->decode({280}), Error);  // a gap in the ids
}

TEST(LoadTokenizer, DirectoryAndConfigTokens) {
  const auto dir = oal::test::make_temp_dir("load");
  write_json(dir, tiny_tokenizer());
  write_json(dir, {{"bos_token", {{"content", "<|e|>"}}}, {"eos_token", "<|eot|>"}}, "tokenizer_config.json");
  const auto tok = load_tokenizer(dir);
  EXPECT_EQ(tok->bos_id(), 301);
  EXPECT_EQ(tok->eos_id(), 300);
  EXPECT_EQ(tok->encode("", true), (std::vector<int32_t>{301}));
  EXPECT_TRUE(tok->encode("", false).empty());
}

TEST(LoadTokenizer, DispatchesLlama2c) {
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  EXPECT_EQ(load_tokenizer(oal::test::shared_file("tok512.bin"))->kind(), "llama2c");
  EXPECT_EQ(load_tokenizer(oal::test::shared_file("qwen-tokenizer"))->kind(), "hf-bpe");
}

// max_token_length 123 makes the file start with '{'; it must still load as llama2.c.
TEST(LoadTokenizer, Llama2cFileStartingWithBrace) {
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  std::ifstream in(oal::test::shared_file("tok512.bin"), std::ios::binary);
  std::string bytes(std::istreambuf_iterator<char>(in), {});
  const int32_t max_len = 123;
  std::memcpy(bytes.data(), &max_len, 4);
  const auto dir = oal::test::make_temp_dir("load");
  oal::test::write_file(dir / "tok.bin", bytes);
  const auto tok = load_tokenizer(dir / "tok.bin");
  EXPECT_EQ(tok->kind(), "llama2c");
  EXPECT_EQ(tok->vocab_size(), 512);
}

TEST(LoadTokenizer, MissingPaths) {
  const auto dir = oal::test::make_temp_dir("load");
  expect_load_error(dir / "nope.json", "[load tokenizer]");
  expect_load_error(dir, "has no tokenizer.json");
  oal::test::write_file(dir / "bad.json", "{\"model\": ");
  expect_load_error(dir / "bad.json", "not valid JSON");
}

TEST(LoadTokenizer, MalformedTokenizerJson) {
  const auto dir = oal::test::make_temp_dir("load");
  auto broken = [&](auto edit, const std::string& needle) {
    json j = tiny_tokenizer();
    edit(j);
    expect_load_error(write_json(dir, j), needle);
  };
  broken([](json& j) { j.erase("model"); }, "tokenizer.json': tokenizer: missing field 'model'");
  broken([](json& j) { j["model"].erase("vocab"); }, "missing field 'vocab'");
  broken([](json& j) { j["model"].erase("merges"); }, "missing field 'merges'");
  broken([](json& j) { j["model"]["type"] = "WordPiece"; }, "unsupported model type 'WordPiece'");
  broken([](json& j) { j["model"]["merges"].push_back("x zz"); }, "tokenizer.json': model.merges[5]: token 'xzz' is not in model.vocab");
  broken([](json& j) { j["model"]["merges"].push_back("abc"); }, "expected two tokens separated by one space");
  broken([](json& j) { j["model"]["vocab"].erase(bl(" ")); }, "no token for byte 0x20");
  broken([](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, "unsupported normalizer 'Lowercase'");
  broken([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+"; },
         "unsupported Split regex");
  broken([](json& j) { j["pre_tokenizer"]["pretokenizers"].erase(1); }, "no ByteLevel step");
  broken([](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true; }, "use_regex true");
  broken([](json& j) { j["decoder"] = {{"type", "Metaspace"}}; }, "unsupported decoder 'Metaspace'");
  broken([](json& j) { j["added_tokens"][0].erase("content"); }, "missing field 'content'");
  broken([](json& j) { j["model"]["vocab"]["he"] = "x"; }, "expected a non-negative int32 id");
  broken([](json& j) { j = json::array(); }, "expected a JSON object");
}

TEST(LoadTokenizer, NfcNormalizerSequence) {
  const auto dir = oal::test::make_temp_dir("load");
  json j = tiny_tokenizer();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}})}};
  const auto tok = load_tokenizer(write_json(dir, j));
  // e + U+0301 composes to U+00E9, whose two UTF-8 bytes are two byte tokens here.
  EXPECT_EQ(tok->encode("e\xCC\x81", false), (std::vector<int32_t>{0xC3, 0xA9}));
}

}  // namespace
}  // namespace oal::text
