// The tokenizer of GGUF metadata (tokenizer.ggml.*) on a hand-made byte-level
// vocabulary whose expected ids are worked out by hand below, the GPT-2 and SmolLM
// pre-tokenizer splits, and metadata errors. The real SmolLM2 vocabulary is compared
// with llama.cpp in tests/model/test_smollm2_llamacpp.cpp.
#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "oal/core/error.h"
#include "oal/io/gguf_writer.h"
#include "oal/text/byte_level.h"
#include "oal/text/gguf_tokenizer.h"
#include "oal/text/split_pattern.h"
#include "oal/text/tokenizer.h"

using namespace oal;
using text::SplitPattern;

namespace {

std::vector<std::string> pieces(std::string_view s, SplitPattern p) {
  std::vector<std::string> out;
  for (auto v : text::split_pretokens(s, p)) out.emplace_back(v);
  return out;
}

// Ids 0..255: the byte-level character of byte b has id b. Then
// 256 "Ġt", 257 "he", 258 "Ġthe" (merges "Ġ t", "h e", "Ġt he" in that rank order),
// 259 "<|im_start|>" and 260 "<|im_end|>" (control), 261 "<s>" (control, BOS).
io::GgufMetadata vocab_metadata(const std::string& pre = "smollm") {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(text::bytes_to_byte_level(std::string(1, static_cast<char>(b))));
  for (const char* t : {"Ġt", "he", "Ġthe", "<|im_start|>", "<|im_end|>", "<s>"}) tokens.push_back(t);
  std::vector<int32_t> types(tokens.size(), 1);
  types[259] = types[260] = types[261] = 3;
  return {{"tokenizer.ggml.model", io::gguf_str("gpt2")},
          {"tokenizer.ggml.pre", io::gguf_str(pre)},
          {"tokenizer.ggml.tokens", io::gguf_str_array(tokens)},
          {"tokenizer.ggml.token_type", io::gguf_i32_array(types)},
          {"tokenizer.ggml.merges", io::gguf_str_array({"Ġ t", "h e", "Ġt he"})},
          {"tokenizer.ggml.bos_token_id", io::gguf_u32(261)},
          {"tokenizer.ggml.eos_token_id", io::gguf_u32(260)},
          {"tokenizer.ggml.add_bos_token", io::gguf_bool(false)},
          {"tokenizer.chat_template", io::gguf_str("{{ messages }}")}};
}

io::GgufHeader header_of(const io::GgufMetadata& md) {
  const std::string bytes = io::encode_gguf(md, {});
  return io::parse_gguf_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.gguf");
}

std::string tokenizer_error(const io::GgufMetadata& md) {
  try {
    text::read_gguf_tokenizer(header_of(md));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

io::GgufMetadata with(io::GgufMetadata md, const std::string& key, io::GgufValue v) {
  for (auto& kv : md)
    if (kv.first == key) kv.second = std::move(v);
  return md;
}

}  // namespace

TEST(Gpt2Split, FollowsTheGpt2Regex) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Hello world!!", SplitPattern::gpt2), (V{"Hello", " world", "!!"}));
  // Contractions are lower-case only in GPT-2's pattern.
  EXPECT_EQ(pieces("I'm OK", SplitPattern::gpt2), (V{"I", "'m", " OK"}));
  EXPECT_EQ(pieces("I'M", SplitPattern::gpt2), (V{"I", "'", "M"}));
  // \s+(?!\S): a run of spaces leaves its last one to the next word.
  EXPECT_EQ(pieces("a   b", SplitPattern::gpt2), (V{"a", "  ", " b"}));
  EXPECT_EQ(pieces("a  ", SplitPattern::gpt2), (V{"a", "  "}));
  EXPECT_EQ(pieces("x\n\ny", SplitPattern::gpt2), (V{"x", "\n", "\n", "y"}));
  EXPECT_EQ(pieces("in 2024", SplitPattern::gpt2), (V{"in", " 2024"}));
}

TEST(Gpt2Split, SmolLmIsolatesEveryDigitFirst) {
  using V = std::vector<std::string>;
  // Each digit is its own piece; the space before a digit is left alone (the regex
  // sees "in " as a stretch that ends there).
  EXPECT_EQ(pieces("in 2024", SplitPattern::smollm), (V{"in", " ", "2", "0", "2", "4"}));
  EXPECT_EQ(pieces("3.14", SplitPattern::smollm), (V{"3", ".", "1", "4"}));
  EXPECT_EQ(pieces("a  1", SplitPattern::smollm), (V{"a", "  ", "1"}));
  EXPECT_EQ(pieces("Hello world", SplitPattern::smollm), (V{"Hello", " world"}));
}

TEST(GgufTokenizer, EncodesTheHandMadeVocabulary) {
  const text::GgufTokenizerInfo info = text::read_gguf_tokenizer(header_of(vocab_metadata()));
  EXPECT_EQ(info.pre, "smollm");
  EXPECT_FALSE(info.add_bos);
  ASSERT_TRUE(info.chat_template.has_value());
  EXPECT_EQ(*info.chat_template, "{{ messages }}");
  const auto dir = test::make_temp_dir("gguf_tok");
  io::write_gguf(dir / "v.gguf", vocab_metadata(), {});
  const auto tok = text::load_tokenizer(dir / "v.gguf");
  EXPECT_EQ(tok->vocab_size(), 262);
  EXPECT_EQ(tok->bos_id(), 261);
  EXPECT_EQ(tok->eos_id(), 260);
  // "the": t h e → "h e" merges → [t, he]; " the": Ġ t h e → "Ġ t" (rank 0) → "h e" →
  // "Ġt he" → [Ġthe].
  EXPECT_EQ(tok->encode("the the", false), (std::vector<int32_t>{'t', 257, 258}));
  // add_bos_token false: encode(text, true) adds no BOS, as llama.cpp does.
  EXPECT_EQ(tok->encode("the", true), (std::vector<int32_t>{'t', 257}));
  io::write_gguf(dir / "bos.gguf", with(vocab_metadata(), "tokenizer.ggml.add_bos_token", io::gguf_bool(true)), {});
  EXPECT_EQ(text::load_tokenizer(dir / "bos.gguf")->encode("the", true), (std::vector<int32_t>{261, 't', 257}));
  // Digits one by one, the space before them its own byte token (Ġ is byte 32's char).
  EXPECT_EQ(tok->encode("a 12", false), (std::vector<int32_t>{'a', ' ', '1', '2'}));
  // Control tokens are cut out of the text first.
  EXPECT_EQ(tok->encode("<|im_start|>the<|im_end|>", false), (std::vector<int32_t>{259, 't', 257, 260}));
  EXPECT_EQ(tok->decode({259, 't', 257, 258}), "<|im_start|>the the");
}

TEST(GgufTokenizer, PreTokenizerNamesMapAsLlamaCppDoes) {
  EXPECT_EQ(text::gguf_pre_tokenizer("smollm"), SplitPattern::smollm);
  EXPECT_EQ(text::gguf_pre_tokenizer("starcoder"), SplitPattern::smollm);
  EXPECT_EQ(text::gguf_pre_tokenizer("gpt2"), SplitPattern::gpt2);
  EXPECT_EQ(text::gguf_pre_tokenizer(""), SplitPattern::gpt2);
  EXPECT_EQ(text::gguf_pre_tokenizer("qwen2"), SplitPattern::qwen2);
  EXPECT_EQ(text::gguf_pre_tokenizer("llama-bpe"), SplitPattern::llama3);
  EXPECT_THROW(text::gguf_pre_tokenizer("deepseek-llm"), Error);
}

TEST(GgufTokenizer, BadMetadataIsRefusedByName) {
  const auto md = vocab_metadata();
  EXPECT_NE(tokenizer_error(with(md, "tokenizer.ggml.model", io::gguf_str("rwkv"))).find("'rwkv' is not supported"),
            std::string::npos);
  // A SentencePiece vocabulary is not read as byte-level BPE (text/spm_tokenizer.h reads it).
  EXPECT_NE(tokenizer_error(with(md, "tokenizer.ggml.model", io::gguf_str("llama"))).find("is SentencePiece"),
            std::string::npos);
  EXPECT_NE(tokenizer_error(with(md, "tokenizer.ggml.pre", io::gguf_str("nope"))).find("tokenizer.ggml.pre 'nope'"),
            std::string::npos);
  EXPECT_NE(tokenizer_error(with(md, "tokenizer.ggml.token_type", io::gguf_i32_array({1, 1})))
                .find("token_type has 2 entries, expected 262"),
            std::string::npos);
  EXPECT_NE(tokenizer_error(with(md, "tokenizer.ggml.merges", io::gguf_str_array({"Ġt"}))).find("expected 'left right'"),
            std::string::npos);
  EXPECT_NE(tokenizer_error(with(md, "tokenizer.ggml.bos_token_id", io::gguf_u32(999))).find("expected an id in [0, 262)"),
            std::string::npos);
  EXPECT_NE(tokenizer_error(with(with(md, "tokenizer.ggml.tokens", io::gguf_str_array({"a", "a"})),
                                      "tokenizer.ggml.token_type", io::gguf_i32_array({1, 1})))
                .find("repeats"),
            std::string::npos);
}

TEST(GgufTokenizer, TokenizerOnlyFileKeepsTheTokenizerAndNothingElse) {
  const auto dir = test::make_temp_dir("gguf_tok");
  io::GgufMetadata md = vocab_metadata();
  md.insert(md.begin(), {"general.architecture", io::gguf_str("llama")});
  const std::string four_floats(16, '\0');
  io::write_gguf(dir / "model.gguf", md, {{"output_norm.weight", {4}, 0, four_floats}});
  text::write_gguf_tokenizer(dir / "model.gguf", dir / "tokenizer.gguf");
  const io::GgufFile t = io::read_gguf(dir / "tokenizer.gguf");
  EXPECT_TRUE(t.header.tensors.empty());
  EXPECT_EQ(t.header.find("general.architecture"), nullptr);
  EXPECT_EQ(t.header.metadata.size(), vocab_metadata().size());
  const auto a = text::load_tokenizer(dir / "model.gguf"), b = text::load_tokenizer(dir / "tokenizer.gguf");
  EXPECT_EQ(a->encode("<|im_start|>the the 12", true), b->encode("<|im_start|>the the 12", true));
}
