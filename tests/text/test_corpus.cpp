// Corpus helpers: files, paragraphs, token blocks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

#include "common/shared_data.h"
#include "oal/core/error.h"
#include "oal/text/block_tensor.h"
#include "oal/text/corpus.h"
#include "common/temp_dir.h"

namespace oal::text {
namespace {

void expect_error_containing(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an oal::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Corpus, ReadTextFileErrors) {
  const auto dir = oal::test::make_temp_dir("corpus");
  expect_error_containing([&] { read_text_file(dir / "missing.txt"); }, "[read text]");
  oal::test::write_file(dir / "empty.txt", "");
  expect_error_containing([&] { read_text_file(dir / "empty.txt"); }, "is empty");
  oal::test::write_file(dir / "t.txt", "hi\n");
  EXPECT_EQ(read_text_file(dir / "t.txt"), "hi\n");
}

TEST(Corpus, SplitParagraphs) {
  EXPECT_EQ(split_paragraphs("a\nb\n\n\n c \r\n \t\r\nd"), (std::vector<std::string>{"a\nb", "c", "d"}));
  EXPECT_EQ(split_paragraphs("one"), (std::vector<std::string>{"one"}));
  EXPECT_TRUE(split_paragraphs("\n \n\n").empty());
  EXPECT_TRUE(split_paragraphs("").empty());
  // No blank line anywhere: every line is its own paragraph (blank lines stripped).
  EXPECT_EQ(split_paragraphs(" = T = \nfirst line .\r\n second\n"),
            (std::vector<std::string>{"= T =", "first line .", "second"}));
}

TEST(Corpus, WikiTextWithoutBlankLinesHasOneParagraphPerLine) {
  OAL_REQUIRE_SHARED_FILE("wikitext2-test.raw");
  const std::string text = read_text_file(oal::test::shared_file("wikitext2-test.raw"));
  const auto p = split_paragraphs(text);
  EXPECT_EQ(p.size(), size_t(std::count(text.begin(), text.end(), '\n')));  // 2891 lines, none blank
  EXPECT_EQ(p.front().rfind("= Robert Boulter =", 0), 0u);
}

TEST(Corpus, TinyStoriesHas2600Paragraphs) {
  OAL_REQUIRE_SHARED_FILE("tinystories-dev.txt");
  const auto p = split_paragraphs(read_text_file(oal::test::shared_file("tinystories-dev.txt")));
  EXPECT_EQ(p.size(), 2600u);  // the shared data README: 2,600 paragraphs
}

TEST(Corpus, ParseBlockRange) {
  auto eq = [](BlockRange r, int64_t b, int64_t e) { return r.begin == b && r.end == e; };
  EXPECT_TRUE(eq(parse_block_range(""), 0, -1));
  EXPECT_TRUE(eq(parse_block_range("all"), 0, -1));
  EXPECT_TRUE(eq(parse_block_range("3"), 3, 4));
  EXPECT_TRUE(eq(parse_block_range("2:5"), 2, 5));
  EXPECT_TRUE(eq(parse_block_range("2:"), 2, -1));
  EXPECT_TRUE(eq(parse_block_range(":5"), 0, 5));
  EXPECT_TRUE(eq(parse_block_range("16-23"), 16, 24));  // inclusive, as parse_index_list
  EXPECT_TRUE(eq(parse_block_range("4-4"), 4, 5));
  for (const char* bad : {"x", "1:2:3", "-1", "5:2", "3:3", "1.5", "5-2", "2-", "1-2:3"})
    expect_error_containing([&] { parse_block_range(bad); }, "[block range]");
}

TEST(Corpus, MakeBlocksDropsTail) {
  std::vector<int32_t> tokens(10);
  std::iota(tokens.begin(), tokens.end(), 0);
  EXPECT_EQ(block_count(10, 3), 3);
  const auto all = make_blocks(tokens, 3);
  EXPECT_EQ(all, (std::vector<std::vector<int32_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}}));
  EXPECT_EQ(make_blocks(tokens, 3, {1, 3}), (std::vector<std::vector<int32_t>>{{3, 4, 5}, {6, 7, 8}}));
  EXPECT_EQ(make_blocks(tokens, 10), (std::vector<std::vector<int32_t>>{tokens}));
}

TEST(Corpus, MakeBlocksErrors) {
  const std::vector<int32_t> tokens = {5, 6, 7};
  expect_error_containing([&] { make_blocks(tokens, 4); }, "need at least 4 tokens for one block of 4, the stream has 3");
  expect_error_containing([&] { make_blocks(tokens, 0); }, "block length must be at least 1");
  expect_error_containing([&] { make_blocks(tokens, 1, {2, 5}); }, "outside the 3 available blocks");
  expect_error_containing([&] { make_blocks(tokens, 1, {3, -1}); }, "outside the 3 available blocks");
  expect_error_containing([&] { make_blocks({}, 1); }, "the stream has 0");
}

TEST(Corpus, BlockTensor) {
  std::vector<int32_t> tokens(7);
  std::iota(tokens.begin(), tokens.end(), 100);
  const at::Tensor t = make_block_tensor(tokens, 2, {1, -1});
  EXPECT_EQ(t.scalar_type(), at::kLong);
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t[0][0].item<int64_t>(), 102);
  EXPECT_EQ(t[1][1].item<int64_t>(), 105);
}

}  // namespace
}  // namespace oal::text
