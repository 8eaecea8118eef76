// The heap merge loop against the plain rescan on a synthetic vocabulary with many
// equal priorities (ties must resolve leftmost in both).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "oal/text/bpe_merge.h"

namespace oal::text {
namespace {

// Every string of length 1..4 over {a, b, c} is a token; priorities in {0..3} so
// that ties are common. Merging concatenates, like a real BPE vocabulary.
struct SyntheticVocab {
  std::vector<std::string> strings;
  std::map<std::string, int32_t> ids;
  std::vector<double> priority;
  SyntheticVocab() {
    std::mt19937 rng(7);
    std::vector<std::string> level = {""};
    for (int len = 1; len <= 4; ++len) {
      std::vector<std::string> next;
      for (const auto& s : level)
        for (char c : {'a', 'b', 'c'}) next.push_back(s + c);
      for (const auto& s : next) {
        ids[s] = static_cast<int32_t>(strings.size());
        strings.push_back(s);
        priority.push_back(static_cast<double>(rng() % 4));
      }
      level = next;
    }
  }
  Merge operator()(int32_t a, int32_t b) const {
    const auto it = ids.find(strings[a] + strings[b]);
    if (it == ids.end()) return {};
    return {true, priority[it->second], it->second};
  }
};

TEST(BpeMerge, HeapEqualsRescan) {
  const SyntheticVocab vocab;
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = rng() % 40;
    std::vector<int32_t> symbols(n);
    for (auto& s : symbols) s = static_cast<int32_t>(rng() % 3);  // single letters
    auto fast = symbols, slow = symbols;
    merge_symbols(fast, vocab);
    merge_symbols_reference(slow, vocab);
    ASSERT_EQ(fast, slow) << "trial " << trial;
    std::string a, b;
    for (int32_t id : fast) a += vocab.strings[id];
    for (int32_t id : symbols) b += vocab.strings[id];
    EXPECT_EQ(a, b);  // merging never changes the text
  }
}

// Hand-checked: "aaa" with only "aa" mergeable merges the leftmost pair first.
TEST(BpeMerge, LeftmostWinsTies) {
  auto lookup = [](int32_t a, int32_t b) -> Merge {
    if (a == 0 && b == 0) return {true, 1.0, 1};  // a + a -> aa
    return {};
  };
  std::vector<int32_t> s = {0, 0, 0};
  merge_symbols(s, lookup);
  EXPECT_EQ(s, (std::vector<int32_t>{1, 0}));
  std::vector<int32_t> r = {0, 0, 0, 0};
  merge_symbols(r, lookup);
  EXPECT_EQ(r, (std::vector<int32_t>{1, 1}));
  std::vector<int32_t> empty;
  merge_symbols(empty, lookup);
  EXPECT_TRUE(empty.empty());
}

}  // namespace
}  // namespace oal::text
