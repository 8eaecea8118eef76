// llama2.c tokenizer against the real tok512.bin and the shared data README.
#include <gtest/gtest.h>

#include <cstring>

#include "common/shared_data.h"
#include "oal/core/error.h"
#include "oal/text/corpus.h"
#include "oal/text/llama2c_tokenizer.h"
#include "oal/text/tokenizer.h"
#include "common/temp_dir.h"

namespace oal::text {
namespace {

std::unique_ptr<Llama2cTokenizer> load_tok512() {
  return Llama2cTokenizer::load(oal::test::shared_file("tok512.bin"));
}

TEST(Llama2cTokenizer, LoadsTok512) {
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto tok = load_tok512();
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->kind(), "llama2c");
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->token_string(3), "<0x00>");
  EXPECT_EQ(tok->token_string(259), " t");  // first merge token of tok512 (score 0)
  EXPECT_EQ(tok->token_id(" t"), 259);
  EXPECT_FALSE(tok->token_id("no such token").has_value());
}

TEST(Llama2cTokenizer, EmptyTextIsEmptyOrBos) {
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto tok = load_tok512();
  EXPECT_TRUE(tok->encode("", false).empty());
  EXPECT_EQ(tok->encode("", true), (std::vector<int32_t>{1}));
}

// Hand-checked with the tok512 vocabulary: " a" is token 261 and no longer token
// contains it here, so "a" encodes as the dummy prefix merged into " a".
TEST(Llama2cTokenizer, SingleLetterMergesWithDummyPrefix) {
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto tok = load_tok512();
  EXPECT_EQ(tok->encode("a", false), (std::vector<int32_t>{261}));
  EXPECT_EQ(tok->encode("a", true), (std::vector<int32_t>{1, 261}));
}

TEST(Llama2cTokenizer, BosPlusPromptRoundTrips) {
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto tok = load_tok512();
  const std::string prompt = "Once upon a time";
  const auto ids = tok->encode(prompt, true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  // The first piece after BOS carries the dummy-prefix space, which decoding drops.
  EXPECT_EQ(tok->token_string(ids[1])[0], ' ');
  EXPECT_EQ(tok->decode(ids), prompt);
  // Streaming: each token's piece after its predecessor concatenates to the text.
  std::string streamed;
  for (size_t i = 1; i < ids.size(); ++i) streamed += tok->decode_token(ids[i - 1], ids[i]);
  EXPECT_EQ(streamed, prompt);
  // Without BOS the same tokens follow the dummy prefix.
  EXPECT_EQ(tok->encode(prompt, false), std::vector<int32_t>(ids.begin() + 1, ids.end()));
}

// U+4E2D (中, bytes E4 B8 AD) is not in tok512, so each byte becomes its byte token
// (byte + 3). "é" (C3 A9) is token 485 of tok512 as a whole character: the README's
// byte rule (default) still uses byte tokens, run.c's character rule uses 485.
TEST(Llama2cTokenizer, ByteFallbackAndWholeCharacters) {
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto tok = load_tok512();
  const int32_t space = *tok->token_id(" ");
  EXPECT_EQ(tok->encode("\xE4\xB8\xAD", false), (std::vector<int32_t>{space, 0xE4 + 3, 0xB8 + 3, 0xAD + 3}));
  EXPECT_EQ(tok->token_string(485), "\xC3\xA9");
  EXPECT_EQ(tok->encode("\xC3\xA9", false), (std::vector<int32_t>{space, 0xC3 + 3, 0xA9 + 3}));
  const auto by_char = Llama2cTokenizer::load(oal::test::shared_file("tok512.bin"), Llama2cInput::characters);
  EXPECT_EQ(by_char->encode("\xC3\xA9", false), (std::vector<int32_t>{space, 485}));
  EXPECT_EQ(by_char->encode("\xE4\xB8\xAD", false), (std::vector<int32_t>{space, 0xE4 + 3, 0xB8 + 3, 0xAD + 3}));
  EXPECT_EQ(tok->decode({1, 0xE4 + 3, 0xB8 + 3, 0xAD + 3}), "\xE4\xB8\xAD");
  EXPECT_EQ(tok->decode({1, 485}), "\xC3\xA9");
  EXPECT_EQ(tok->decode_token(5, 0x0A + 3), "\n");
}

TEST(Llama2cTokenizer, RoundTripsParagraphs) {
  OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto tok = load_tok512();
  const auto paragraphs = split_paragraphs(read_text_file(oal::test::shared_file("tinystories-dev.txt")));
  ASSERT_GT(paragraphs.size(), 100u);
  for (size_t i = 0; i < paragraphs.size(); i += 50) {
    EXPECT_EQ(tok->decode(tok->encode(paragraphs[i], true)), paragraphs[i]) << "paragraph " << i;
    EXPECT_EQ(tok->decode(tok->encode(paragraphs[i], false)), paragraphs[i]) << "paragraph " << i;
  }
  const std::string odd = "  two leading spaces, tabs\tand \xF0\x9F\xA4\x96 emoji\n";
  EXPECT_EQ(tok->decode(tok->encode(odd, true)), odd);
}

// The shared data README: run.c encoding of the whole file, no BOS, 234,251 tokens.
TEST(Llama2cTokenizer, WholeTinyStoriesFileTokenCount) {
  OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto tok = load_tok512();
  const std::string text = read_text_file(oal::test::shared_file("tinystories-dev.txt"));
  // (~0.15 s of CPU here; an O(n^2) rescan would take minutes and time the test out.
  // Speed is not asserted: unit tests hold no timed bounds.)
  const auto ids = tok->encode(text, false);
  EXPECT_EQ(ids.size(), 234251u);
  EXPECT_EQ(tok->decode(ids), text);
}

// run.c's whole-character lookup gives fewer tokens on the same file (its 775
// non-ASCII bytes include characters such as curly quotes that tok512 has as single
// tokens); 233,831 was counted by an independent Python transcription of run.c.
TEST(Llama2cTokenizer, WholeFileTokenCountWithRunCCharacters) {
  OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto tok = Llama2cTokenizer::load(oal::test::shared_file("tok512.bin"), Llama2cInput::characters);
  const std::string text = read_text_file(oal::test::shared_file("tinystories-dev.txt"));
  const auto ids = tok->encode(text, false);
  EXPECT_EQ(ids.size(), 233831u);
  EXPECT_EQ(tok->decode(ids), text);
}

// The heap merge against run.c's plain rescan loop, on real text of several lengths.
TEST(Llama2cTokenizer, FastMergeEqualsReference) {
  OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto tok = load_tok512();
  const auto paragraphs = split_paragraphs(read_text_file(oal::test::shared_file("tinystories-dev.txt")));
  for (size_t i = 0; i < paragraphs.size(); i += 97) {
    for (bool bos : {false, true})
      EXPECT_EQ(tok->encode(paragraphs[i], bos), tok->encode_reference(paragraphs[i], bos)) << "paragraph " << i;
  }
  const auto by_char = Llama2cTokenizer::load(oal::test::shared_file("tok512.bin"), Llama2cInput::characters);
  for (std::string s : {"a", "aa", "aaaa aaaa", "\xE4\xB8\xAD\xC3\xA9 \n\n x", "the the the the",
                        "\xE2\x80\x9CHi,\xE2\x80\x9D she said\xE2\x80\xA6"}) {
    EXPECT_EQ(tok->encode(s, false), tok->encode_reference(s, false)) << s;
    EXPECT_EQ(by_char->encode(s, true), by_char->encode_reference(s, true)) << s;
  }
}

TEST(Llama2cTokenizer, UnknownIdIsAnError) {
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto tok = load_tok512();
  EXPECT_THROW(tok->decode({512}), Error);
  EXPECT_THROW(tok->decode({-1}), Error);
}

std::string tok512_bytes() {
  std::ifstream in(oal::test::shared_file("tok512.bin"), std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void expect_error_containing(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an oal::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Llama2cTokenizer, TruncatedFileIsAnError) {
  OAL_REQUIRE_SHARED_FILE("tok512.bin");
  const auto dir = oal::test::make_temp_dir("l2c");
  const std::string bytes = tok512_bytes();
  for (size_t cut : {size_t{2}, size_t{7}, size_t{13}, bytes.size() - 1}) {
    const auto p = dir / "cut.bin";
    oal::test::write_file(p, bytes.substr(0, cut));
    expect_error_containing([&] { Llama2cTokenizer::load(p); }, "[llama2c tokenizer]");
  }
  oal::test::write_file(dir / "cut.bin", bytes.substr(0, bytes.size() - 1));
  expect_error_containing([&] { Llama2cTokenizer::load(dir / "cut.bin"); }, "truncated in token 511");
  expect_error_containing([&] { Llama2cTokenizer::load(dir / "missing.bin"); }, "cannot open");
}

TEST(Llama2cTokenizer, TooFewTokensIsAnError) {
  const auto dir = oal::test::make_temp_dir("l2c");
  std::string bytes(4, '\0');
  const int32_t max_len = 8;
  std::memcpy(bytes.data(), &max_len, 4);
  for (const std::string tok : {"<unk>", "<s>", "</s>"}) {
    const float score = 0;
    const int32_t len = static_cast<int32_t>(tok.size());
    bytes.append(reinterpret_cast<const char*>(&score), 4);
    bytes.append(reinterpret_cast<const char*>(&len), 4);
    bytes += tok;
  }
  oal::test::write_file(dir / "small.bin", bytes);
  expect_error_containing([&] { Llama2cTokenizer::load(dir / "small.bin"); }, "at least 259 tokens");
}

}  // namespace
}  // namespace oal::text
