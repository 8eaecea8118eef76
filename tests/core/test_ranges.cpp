#include <gtest/gtest.h>

#include "oal/core/error.h"
#include "oal/core/ranges.h"

using oal::parse_index_list;

TEST(Ranges, ParsesItemsAndRangesInOrder) {
  EXPECT_EQ(parse_index_list("0,2,4-7", "layers"), (std::vector<int64_t>{0, 2, 4, 5, 6, 7}));
  EXPECT_EQ(parse_index_list("0-15", "blocks").size(), 16u);
  EXPECT_EQ(parse_index_list(" 3 , 1 ", "layers"), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(parse_index_list("5-5", "layers"), (std::vector<int64_t>{5}));
}

TEST(Ranges, RejectsMalformedLists) {
  for (const char* bad : {"", " ", "1,", ",1", "1,,2", "a", "1-", "-1", "3-1", "1.5", "1,1",
                          "0-3,2", "2x"}) {
    EXPECT_THROW(parse_index_list(bad, "layers"), oal::Error) << "'" << bad << "'";
  }
}

TEST(Ranges, MessageNamesTheOperation) {
  try {
    parse_index_list("7-3", "layers");
    FAIL() << "expected an error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[layers]"), std::string::npos) << e.what();
  }
}

TEST(Ranges, EnforcesLimit) {
  EXPECT_EQ(parse_index_list("0-4", "layers", 5).size(), 5u);
  EXPECT_THROW(parse_index_list("0-5", "layers", 5), oal::Error);
}

TEST(Ranges, FormatsRunsCompactly) {
  EXPECT_EQ(oal::format_index_list({0, 2, 4, 5, 6, 7}), "0,2,4-7");
  EXPECT_EQ(oal::format_index_list({}), "");
  EXPECT_EQ(oal::format_index_list({3}), "3");
  EXPECT_EQ(parse_index_list(oal::format_index_list({1, 2, 3, 9, 11, 12}), "x"),
            (std::vector<int64_t>{1, 2, 3, 9, 11, 12}));
}

TEST(SplitNames, KeepsOrderAndDropsEmptyItems) {
  EXPECT_EQ(oal::split_names("oal,global"), (std::vector<std::string>{"oal", "global"}));
  EXPECT_EQ(oal::split_names(",a,,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(oal::split_names("").empty());
  EXPECT_TRUE(oal::split_names(",,").empty());
  EXPECT_EQ(oal::split_names("one"), (std::vector<std::string>{"one"}));
}
