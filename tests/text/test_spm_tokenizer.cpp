// SentencePiece ("llama") GGUF vocabularies: the merge rule on a hand-made vocabulary
// whose ids are worked out by hand below, and a real SentencePiece BPE model against
// Google's `sentencepiece` on 229 texts (tests/text/data/spm_reference.json, written by
// scripts/spm_reference.py: a 512-piece model trained with Llama-2's settings, since no
// SentencePiece GGUF file is on this machine), read through a GGUF file as llama.cpp's
// converter writes one. Metadata errors name the key.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "oal/core/error.h"
#include "oal/io/gguf_writer.h"
#include "oal/text/gguf_tokenizer.h"
#include "oal/text/spm_tokenizer.h"
#include "oal/text/tokenizer.h"

using namespace oal;
using text::SpmTokenType;

namespace {

// Ids: 0 <unk>, 1 <s>, 2 </s>, 3 "▁", 4 "a", 5 "b", 6 "c", 7 "ab" (score 5), 8 "bc" (6),
// 9 "▁a" (4), 10 "▁ab" (3), 11 "<0xC3>", 12 "<0xA9>" (bytes), 13 "<|user|>" (user-defined).
text::SpmVocab hand_vocab() {
  text::SpmVocab v;
  v.tokens = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "c", "ab", "bc",
              "\xe2\x96\x81" "a", "\xe2\x96\x81" "ab", "<0xC3>", "<0xA9>", "<|user|>"};
  v.scores = {0, 0, 0, -1, -2, -2, -2, 5, 6, 4, 3, 0, 0, 0};
  v.types = {SpmTokenType::unknown, SpmTokenType::control, SpmTokenType::control};
  v.types.resize(v.tokens.size(), SpmTokenType::normal);
  v.types[11] = v.types[12] = SpmTokenType::byte;
  v.types[13] = SpmTokenType::user_defined;
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  return v;
}

using test::error_of;

nlohmann::json reference() {
  std::ifstream in("tests/text/data/spm_reference.json");
  EXPECT_TRUE(in.good()) << "tests/text/data/spm_reference.json (run from the source root)";
  return nlohmann::json::parse(in);
}

// The reference vocabulary as llama.cpp's converter writes it into a GGUF file.
io::GgufMetadata gguf_metadata(const nlohmann::json& v) {
  return {{"tokenizer.ggml.model", io::gguf_str("llama")},
          {"tokenizer.ggml.tokens", io::gguf_str_array(v["tokens"].get<std::vector<std::string>>())},
          {"tokenizer.ggml.scores", io::gguf_f32_array(v["scores"].get<std::vector<float>>())},
          {"tokenizer.ggml.token_type", io::gguf_i32_array(v["types"].get<std::vector<int32_t>>())},
          {"tokenizer.ggml.unknown_token_id", io::gguf_u32(v["unk"].get<uint32_t>())},
          {"tokenizer.ggml.bos_token_id", io::gguf_u32(v["bos"].get<uint32_t>())},
          {"tokenizer.ggml.eos_token_id", io::gguf_u32(v["eos"].get<uint32_t>())},
          {"tokenizer.ggml.add_bos_token", io::gguf_bool(true)}};
}

io::GgufHeader header_of(const io::GgufMetadata& md) {
  const std::string bytes = io::encode_gguf(md, {});
  return io::parse_gguf_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.gguf");
}

}  // namespace

TEST(SpmTokenizer, MergesTheHighestScoringPairFirst) {
  const text::SpmTokenizer t(hand_vocab());
  // "abc" -> "▁abc": pairs ▁a (4), ab (5), bc (6). bc merges first; ab is then stale;
  // ▁a merges; "▁abc" is no token. So [▁a, bc], not the [▁ab, c] a longest-match
  // tokenizer would give.
  EXPECT_EQ(t.encode("abc", false), (std::vector<int32_t>{9, 8}));
  EXPECT_EQ(t.encode("abc", true), (std::vector<int32_t>{1, 9, 8}));
  // "ab": ▁a (4) and ab (5): ab first, then ▁ + ab = ▁ab (3).
  EXPECT_EQ(t.encode("ab", false), (std::vector<int32_t>{10}));
  // Spaces are ▁; "a b" -> ▁a, ▁, b (no "▁b" token).
  EXPECT_EQ(t.encode("a b", false), (std::vector<int32_t>{9, 3, 5}));
  EXPECT_TRUE(t.encode("", false).empty());
  EXPECT_EQ(t.encode("", true), (std::vector<int32_t>{1}));
}

TEST(SpmTokenizer, UnknownCharactersFallBackToBytesOrTheUnknownToken) {
  const text::SpmTokenizer t(hand_vocab());
  // "é" = C3 A9: both byte tokens exist.
  EXPECT_EQ(t.encode("\xc3\xa9", false), (std::vector<int32_t>{3, 11, 12}));
  // "ñ" = C3 B1: 0xB1 has no byte token, so the unknown token stands in for it.
  EXPECT_EQ(t.encode("\xc3\xb1", false), (std::vector<int32_t>{3, 11, 0}));
  text::SpmVocab no_unk = hand_vocab();
  no_unk.unk = -1;
  EXPECT_NE(error_of([&] { text::SpmTokenizer(no_unk).encode("\xc3\xb1", false); })
                .find("byte 0xB1 has no token"),
            std::string::npos);
}

TEST(SpmTokenizer, AddedTokensAreCutOutAndTheNextPieceIsPrefixed) {
  const text::SpmTokenizer t(hand_vocab());
  // "<|user|>" (user-defined) and "<s>" (control) are matched as text; the piece after
  // each gets the space prefix again, as the text's first piece does.
  EXPECT_EQ(t.encode("ab<|user|>ab", false), (std::vector<int32_t>{10, 13, 10}));
  EXPECT_EQ(t.encode("<s>ab", false), (std::vector<int32_t>{1, 10}));
  text::SpmVocab no_prefix = hand_vocab();
  no_prefix.add_space_prefix = false;
  EXPECT_EQ(text::SpmTokenizer(no_prefix).encode("ab", false), (std::vector<int32_t>{7}));
}

TEST(SpmTokenizer, DecodeUndoesTheEncoding) {
  const text::SpmTokenizer t(hand_vocab());
  for (const char* s : {"abc", "a b", "ab<|user|>ab", "\xc3\xa9 a"}) {
    EXPECT_EQ(t.decode(t.encode(s, false)), s) << s;
    EXPECT_EQ(t.decode(t.encode(s, true)), s) << s;
  }
  EXPECT_EQ(t.decode_token(-1, 1), "");            // control: nothing
  EXPECT_EQ(t.decode_token(-1, 9), "a");           // the prefixed space dropped at the start
  EXPECT_EQ(t.decode_token(4, 9), " a");           // kept inside the text
  EXPECT_EQ(t.decode_token(4, 0), "\xe2\x96\x85");  // <unk> as llama.cpp prints it
  EXPECT_THROW(t.decode_token(-1, 99), Error);
}

TEST(SpmTokenizer, BadVocabulariesAreRefused) {
  auto bad = [](const std::function<void(text::SpmVocab&)>& edit) {
    text::SpmVocab v = hand_vocab();
    edit(v);
    return error_of([&] { text::SpmTokenizer{v}; });
  };
  EXPECT_NE(bad([](auto& v) { v.scores.pop_back(); }).find("one of each per token"), std::string::npos);
  EXPECT_NE(bad([](auto& v) { v.tokens[5] = "a"; }).find("repeats an earlier token"), std::string::npos);
  EXPECT_NE(bad([](auto& v) { v.tokens[11] = "<0xZZ>"; }).find("not of the form <0xAB>"), std::string::npos);
  EXPECT_NE(bad([](auto& v) { v.bos = 99; }).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(bad([](auto& v) { v.tokens.clear(); v.scores.clear(); v.types.clear(); }).find("empty"),
            std::string::npos);
}

TEST(SpmTokenizer, MatchesSentencePieceThroughAGgufFile) {
  const nlohmann::json ref = reference();
  const auto dir = test::make_temp_dir("spm");
  io::write_gguf(dir / "tokenizer.gguf", gguf_metadata(ref["vocab"]), {});
  const auto tok = text::load_tokenizer(dir / "tokenizer.gguf");
  EXPECT_EQ(tok->kind(), "spm");
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  int checked = 0;
  for (const auto& c : ref["cases"]) {
    const std::string text = c["text"];
    const auto want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(text, false), want) << c["source"] << ": '" << text << "'";
    std::vector<int32_t> with_bos = {1};
    with_bos.insert(with_bos.end(), want.begin(), want.end());
    EXPECT_EQ(tok->encode(text, true), with_bos) << text;
    EXPECT_EQ(tok->decode(want), c["decoded"].get<std::string>()) << text;
    ++checked;
  }
  EXPECT_EQ(checked, 229);
}

TEST(SpmTokenizer, GgufMetadataErrorsNameTheKey) {
  const nlohmann::json ref = reference();
  auto error_with = [&](const std::string& key, const io::GgufValue* value) {
    io::GgufMetadata md;
    for (const auto& kv : gguf_metadata(ref["vocab"]))
      if (kv.first != key) md.push_back(kv);
    if (value) md.emplace_back(key, *value);
    return error_of([&] { text::gguf_tokenizer(header_of(md)); });
  };
  EXPECT_NE(error_with("tokenizer.ggml.scores", nullptr).find("tokenizer.ggml.scores is missing"),
            std::string::npos);
  const io::GgufValue short_scores = io::gguf_f32_array({1.0f, 2.0f});
  EXPECT_NE(error_with("tokenizer.ggml.scores", &short_scores).find("has 2 entries, expected 512"),
            std::string::npos);
  std::vector<int32_t> types = ref["vocab"]["types"].get<std::vector<int32_t>>();
  types[7] = 9;
  const io::GgufValue bad_types = io::gguf_i32_array(types);
  EXPECT_NE(error_with("tokenizer.ggml.token_type", &bad_types).find("expected 1..6"), std::string::npos);
  const io::GgufValue far_bos = io::gguf_u32(4000);
  EXPECT_NE(error_with("tokenizer.ggml.bos_token_id", &far_bos).find("expected an id in [0, 512)"),
            std::string::npos);
  const io::GgufValue other = io::gguf_str("rwkv");
  EXPECT_NE(error_with("tokenizer.ggml.model", &other).find("'rwkv' is not supported"), std::string::npos);
}
