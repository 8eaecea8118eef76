// HF byte-level BPE against the reference ids in ../shared/data/tokenizer-references.json.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/shared_data.h"
#include "oal/core/error.h"
#include "oal/text/byte_level.h"
#include "oal/text/hf_bpe_spec.h"
#include "oal/text/hf_bpe_tokenizer.h"
#include "oal/text/split_pattern.h"
#include "oal/text/tokenizer.h"

namespace oal::text {
namespace {

struct Reference {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Reference> references(const std::string& name) {
  std::ifstream in(oal::test::shared_file("tokenizer-references.json"));
  const auto j = nlohmann::json::parse(in);
  std::vector<Reference> out;
  for (const auto& e : j.at(name)) out.push_back({e.at("text").get<std::string>(), e.at("ids").get<std::vector<int32_t>>()});
  return out;
}

// Loading the 11 MB tokenizer once per test binary keeps the suite quick.
const Tokenizer& shared_tokenizer(const std::string& dir) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[dir];
  if (!slot) slot = load_tokenizer(oal::test::shared_file(dir));
  return *slot;
}

void check_references(const std::string& dir, const std::string& name) {
  const Tokenizer& tok = shared_tokenizer(dir);
  const auto refs = references(name);
  ASSERT_GE(refs.size(), 9u);
  for (const auto& r : refs) {
    EXPECT_EQ(tok.encode(r.text, false), r.ids) << name << ": " << r.text;
    EXPECT_EQ(tok.decode(r.ids), r.text) << name << ": " << r.text;
  }
}

TEST(HfBpeTokenizer, QwenReferences) {
  OAL_REQUIRE_SHARED_FILE("tokenizer-references.json");
  OAL_REQUIRE_SHARED_FILE("qwen-tokenizer/tokenizer.json");
  check_references("qwen-tokenizer", "qwen");
}

TEST(HfBpeTokenizer, Llama3References) {
  OAL_REQUIRE_SHARED_FILE("tokenizer-references.json");
  OAL_REQUIRE_SHARED_FILE("llama3-tokenizer/tokenizer.json");
  check_references("llama3-tokenizer", "llama3");
}

TEST(HfBpeTokenizer, QwenLoadsWithExpectedVocabulary) {
  OAL_REQUIRE_SHARED_FILE("qwen-tokenizer/tokenizer.json");
  // (Loading takes ~0.7 s of CPU here. Speed is not asserted: a timed bound flaked under
  // the sanitizers; unit tests hold no timed bounds.)
  const auto tok = load_tokenizer(oal::test::shared_file("qwen-tokenizer/tokenizer.json"));
  EXPECT_EQ(tok->kind(), "hf-bpe");
  // 151,643 BPE tokens + 26 added tokens with consecutive ids.
  EXPECT_EQ(tok->vocab_size(), 151669);
  EXPECT_EQ(tok->bos_id(), -1);  // tokenizer_config.json: bos_token null
  EXPECT_EQ(tok->eos_id(), 151645);
  EXPECT_EQ(tok->token_string(151643), "<|endoftext|>");
  EXPECT_EQ(tok->token_string(9707), "Hello");
  EXPECT_EQ(tok->token_string(1879), "\xC4\xA0world");  // "Ġworld"
  // No BOS token: add_bos adds nothing.
  EXPECT_EQ(tok->encode("Hello world", true), (std::vector<int32_t>{9707, 1879}));
}

TEST(HfBpeTokenizer, Llama3BosFromConfig) {
  OAL_REQUIRE_SHARED_FILE("llama3-tokenizer/tokenizer.json");
  const Tokenizer& tok = shared_tokenizer("llama3-tokenizer");
  EXPECT_EQ(tok.bos_id(), 128000);
  EXPECT_EQ(tok.eos_id(), 128001);
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_EQ(tok.encode("Hello world", true), (std::vector<int32_t>{128000, 9906, 1917}));
  EXPECT_EQ(tok.decode({128000, 9906, 1917}), "<|begin_of_text|>Hello world");
}

TEST(HfBpeTokenizer, SpecialTokensAreSplitOut) {
  OAL_REQUIRE_SHARED_FILE("qwen-tokenizer/tokenizer.json");
  const Tokenizer& tok = shared_tokenizer("qwen-tokenizer");
  // <|im_start|> 151644, <|im_end|> 151645, <|endoftext|> 151643, <think> 151667 (not special).
  const auto ids = tok.encode("<|im_start|>Hello world<|im_end|><|endoftext|><think>", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{151644, 9707, 1879, 151645, 151643, 151667}));
  const std::string text = "a<|im_start|>b";
  EXPECT_EQ(tok.decode(tok.encode(text, false)), text);
  // A broken special token is ordinary text.
  const auto plain = tok.encode("<|im_start", false);
  for (int32_t id : plain) EXPECT_LT(id, 151643);
}

TEST(HfBpeTokenizer, NfcNormalisesDecomposedInput) {
  OAL_REQUIRE_SHARED_FILE("qwen-tokenizer/tokenizer.json");
  OAL_REQUIRE_SHARED_FILE("llama3-tokenizer/tokenizer.json");
  const Tokenizer& qwen = shared_tokenizer("qwen-tokenizer");
  // "café" with U+00E9 vs "cafe" + U+0301 combining acute: Qwen (NFC) sees the same text.
  EXPECT_EQ(qwen.encode("caf\xC3\xA9", false), qwen.encode("cafe\xCC\x81", false));
  // Llama-3 has no normalizer, so the decomposed form tokenizes differently.
  const Tokenizer& llama = shared_tokenizer("llama3-tokenizer");
  EXPECT_NE(llama.encode("caf\xC3\xA9", false), llama.encode("cafe\xCC\x81", false));
}

TEST(HfBpeTokenizer, RoundTripsAwkwardText) {
  OAL_REQUIRE_SHARED_FILE("qwen-tokenizer/tokenizer.json");
  OAL_REQUIRE_SHARED_FILE("llama3-tokenizer/tokenizer.json");
  const std::vector<std::string> texts = {
      "", " ", "\n\n\n", "a", "  x  ", "\xF0\x9F\x98\x80\xF0\x9F\x98\x80!", "It'S 1234567 o'clock\r\n",
      "\xE2\x80\x83wide\xE3\x80\x80space", std::string(1000, 'a'), std::string(300, ' ') + "end"};
  for (const std::string dir : {"qwen-tokenizer", "llama3-tokenizer"}) {
    const Tokenizer& tok = shared_tokenizer(dir);
    for (const auto& t : texts) EXPECT_EQ(tok.decode(tok.encode(t, false)), t) << dir << ": " << t.substr(0, 40);
    EXPECT_TRUE(tok.encode("", false).empty());
  }
}

// The heap merge with cache against the plain rescan, piece by piece.
TEST(HfBpeTokenizer, FastMergeEqualsReference) {
  OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  OAL_REQUIRE_SHARED_FILE("qwen-tokenizer/tokenizer.json");
  const auto tok = HfBpeTokenizer::load(oal::test::shared_file("qwen-tokenizer/tokenizer.json"));
  std::ifstream in(oal::test::shared_file("tinystories-dev.txt"), std::ios::binary);
  std::string text(20000, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text += " supercalifragilisticexpialidocious " + std::string(500, 'z');
  std::vector<int32_t> expected;
  for (auto piece : split_pretokens(text, SplitPattern::qwen2)) {
    const auto ids = tok->bpe_piece_reference(piece);
    expected.insert(expected.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(tok->encode(text, false), expected);
}

TEST(HfBpeTokenizer, UnknownIdIsAnError) {
  OAL_REQUIRE_SHARED_FILE("qwen-tokenizer/tokenizer.json");
  const Tokenizer& tok = shared_tokenizer("qwen-tokenizer");
  EXPECT_THROW(tok.decode({151669}), Error);
  EXPECT_THROW(tok.decode({-3}), Error);
}

// Found by fuzz_tokenizer_json: one token with id ~2^31 made the id-indexed tables
// allocate tens of gigabytes. Ids far beyond the listed tokens are a named error; the
// same vocabulary with dense ids loads.
TEST(HfBpeTokenizer, HugeSparseIdIsAnError) {
  HfBpeSpec spec;
  for (int b = 0; b < 256; ++b)
    spec.vocab.emplace_back(bytes_to_byte_level(std::string(1, static_cast<char>(b))), b);
  EXPECT_NO_THROW(HfBpeTokenizer{spec});
  spec.vocab.emplace_back("hello", 256);
  EXPECT_NO_THROW(HfBpeTokenizer{spec});
  spec.vocab.back().second = 2000000000;
  try {
    HfBpeTokenizer t(spec);
    ADD_FAILURE() << "expected an error for token id 2000000000";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("far beyond the 257 tokens"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace oal::text
