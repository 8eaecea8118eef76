// Splits: the grouping paragraphs never overlap the blocks the fits and the evaluation
// read (checked on byte offsets with a one-byte-per-token tokenizer, where the stream
// position of every paragraph is plain arithmetic), a separate prompt text is taken as
// it is, and impossible splits are named errors.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "oal/core/error.h"
#include "oal/linearize/splits.h"

using namespace oal;

namespace {

// One token per byte (ids 0..255), no BOS.
class ByteTokenizer final : public text::Tokenizer {
 public:
  std::string kind() const override { return "bytes"; }
  std::vector<int32_t> encode(std::string_view t, bool) const override {
    return std::vector<int32_t>(t.begin(), t.end());
  }
  std::string decode_token(int32_t, int32_t id) const override { return std::string(1, static_cast<char>(id)); }
  int32_t vocab_size() const override { return 256; }
  int32_t bos_id() const override { return -1; }
  int32_t eos_id() const override { return -1; }
  const std::string& token_string(int32_t) const override { return empty_; }
  std::optional<int32_t> token_id(std::string_view) const override { return std::nullopt; }

 private:
  std::string empty_;
};

// 100 paragraphs "paragraph NN: ..." of 40 bytes, blank-line separated.
std::string numbered_text() {
  std::string t;
  for (int i = 0; i < 100; ++i) t += fmt::format("paragraph {:02d}: {:<26}\n\n", i, "filler words here");
  return t;
}

calib::BlockSplit small_split() {
  calib::BlockSplit s;
  s.train = {2, 3};
  s.val = {4};
  s.eval = {0, 1};
  return s;
}

}  // namespace

TEST(Splits, GroupingParagraphsStartAfterEveryBlock) {
  const std::string text = numbered_text();
  const ByteTokenizer tok;
  const linearize::Splits s = linearize::make_splits(text, tok, 64, small_split(), std::nullopt);
  EXPECT_EQ(s.ctx, 64);
  // The blocks use the first 5 × 64 = 320 bytes of the stream.
  ASSERT_FALSE(s.grouping_paragraphs.empty());
  for (const auto& p : s.grouping_paragraphs) {
    const size_t at = text.find(p);
    ASSERT_NE(at, std::string::npos);
    EXPECT_GE(at, 320u) << p;
  }
  // The cut is conservative by construction: paragraphs are counted by their own trimmed
  // encoding ("paragraph NN: filler words here" = 31 tokens, no separators), so 11 of
  // them reach 320 tokens, and one more is skipped as a margin: the first is number 12.
  EXPECT_EQ(s.grouping_paragraphs.front().substr(0, 13), "paragraph 12:");
  EXPECT_EQ(s.grouping_paragraphs.size(), 88u);
  EXPECT_NE(s.grouping_source.find("after the first 320 tokens (blocks 0..4)"), std::string::npos);
}

TEST(Splits, ASeparatePromptTextIsTakenWhole) {
  const ByteTokenizer tok;
  const linearize::Splits s = linearize::make_splits(numbered_text(), tok, 64, small_split(),
                                                     std::string("first prompt\n\nsecond prompt\n"));
  EXPECT_EQ(s.grouping_paragraphs, (std::vector<std::string>{"first prompt", "second prompt"}));
  EXPECT_EQ(s.grouping_source, "a separate prompt text");
}

TEST(Splits, ImpossibleSplitsAreNamed) {
  const ByteTokenizer tok;
  calib::BlockSplit overlap = small_split();
  overlap.val = {3};
  EXPECT_THROW(linearize::make_splits(numbered_text(), tok, 64, overlap, std::nullopt), Error);
  // Blocks that use the whole text leave no grouping prompt.
  try {
    linearize::make_splits(numbered_text(), tok, 1000, small_split(), std::nullopt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[analyze]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(linearize::make_splits(numbered_text(), tok, 1, small_split(), std::nullopt), Error);
}
