// The hand-written Qwen2 / Llama-3 Split matchers on hand-checked cases. Each
// expectation follows the regex's leftmost-first alternation by hand (comments say
// which alternative produced a piece).
#include <gtest/gtest.h>

#include "oal/core/error.h"
#include "oal/text/split_pattern.h"

namespace oal::text {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const std::string& text, SplitPattern p = SplitPattern::qwen2) {
  Pieces out;
  for (auto v : split_pretokens(text, p)) out.emplace_back(v);
  return out;
}

TEST(SplitPattern, WordsTakeOneLeadingNonLetter) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("\tword"), (Pieces{"\tword"}));      // [^\r\n\p{L}\p{N}]?\p{L}+
  EXPECT_EQ(split("'x"), (Pieces{"'x"}));              // not a contraction: ' then letters
  EXPECT_EQ(split("\xE4\xB8\xAD\xE6\x96\x87"), (Pieces{"\xE4\xB8\xAD\xE6\x96\x87"}));  // 中文: letters
  EXPECT_EQ(split("\nword"), (Pieces{"\n", "word"}));  // \n may not lead a word
}

TEST(SplitPattern, ContractionsAreCaseInsensitive) {
  EXPECT_EQ(split("it'S"), (Pieces{"it", "'S"}));
  EXPECT_EQ(split("they'll've"), (Pieces{"they", "'ll", "'ve"}));
  EXPECT_EQ(split("I'M"), (Pieces{"I", "'M"}));
  EXPECT_EQ(split("we'Re'd"), (Pieces{"we", "'Re", "'d"}));
}

TEST(SplitPattern, DigitsDifferBetweenPatterns) {
  EXPECT_EQ(split("I'm 12345 ok"), (Pieces{"I", "'m", " ", "1", "2", "3", "4", "5", " ok"}));
  EXPECT_EQ(split("I'm 12345 ok", SplitPattern::llama3), (Pieces{"I", "'m", " ", "123", "45", " ok"}));
  // ½ and ² are \p{N} (No), ٣ is Nd.
  EXPECT_EQ(split("x\xC2\xB2\xC2\xBD", SplitPattern::llama3), (Pieces{"x", "\xC2\xB2\xC2\xBD"}));
  EXPECT_EQ(split("\xD9\xA3\xD9\xA3"), (Pieces{"\xD9\xA3", "\xD9\xA3"}));
}

TEST(SplitPattern, PunctuationTakesOneSpaceAndTrailingNewlines) {
  EXPECT_EQ(split("...!!\n\nok"), (Pieces{"...!!\n\n", "ok"}));
  EXPECT_EQ(split("a ?!"), (Pieces{"a", " ?!"}));
  EXPECT_EQ(split("$%^&*()_+=[]{}"), (Pieces{"$%^&*()_+=[]{}"}));
  EXPECT_EQ(split("x  ,"), (Pieces{"x", " ", " ,"}));
}

TEST(SplitPattern, WhitespaceRuns) {
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));          // \s+(?!\S) leaves one space
  EXPECT_EQ(split("end   "), (Pieces{"end", "   "}));          // at the end all of it
  EXPECT_EQ(split("x\n\ny"), (Pieces{"x", "\n\n", "y"}));       // \s*[\r\n]+
  EXPECT_EQ(split("x \n y"), (Pieces{"x", " \n", " y"}));       // up to the last line break
  EXPECT_EQ(split("x\r\n\t\ty"), (Pieces{"x", "\r\n", "\t", "\ty"}));
  EXPECT_EQ(split(" "), (Pieces{" "}));
  EXPECT_EQ(split("a \xE3\x80\x80" "b"), (Pieces{"a", " ", "\xE3\x80\x80" "b"}));  // U+3000 is \s
}

TEST(SplitPattern, PiecesCoverInputIncludingInvalidUtf8) {
  const std::string text = "ok\xFF\xFEzz 1\xC3";
  std::string joined;
  for (const auto& p : split(text)) joined += p;
  EXPECT_EQ(joined, text);
  EXPECT_TRUE(split("").empty());
}

TEST(SplitPattern, RecognisesOnlyKnownPatterns) {
  EXPECT_EQ(split_pattern_from_regex(split_pattern_regex(SplitPattern::qwen2)), SplitPattern::qwen2);
  EXPECT_EQ(split_pattern_from_regex(split_pattern_regex(SplitPattern::llama3)), SplitPattern::llama3);
  try {
    split_pattern_from_regex("\\w+");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported Split regex '\\w+'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace oal::text
