// The checked JSON integer readers (io/json_file.h): JSON integers in range are
// returned; floats, strings, out-of-range values come back as oal::Error naming the
// operation and the field — never a cast (nlohmann's get<int64_t>() of 3.5e32 is
// undefined behaviour, which is how the fuzz targets found this class of bug).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "oal/core/error.h"
#include "oal/io/json_file.h"

namespace {

using nlohmann::json;
using oal::io::json_int;
using oal::io::json_int_list;
using oal::io::json_int_or;
using oal::io::json_uint;

// The message of the oal::Error `fn` throws ("no error" when it returns).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const oal::Error& e) {
    return e.what();
  }
  return "no error";
}

void expect_error(const std::function<void()>& fn, const std::string& expected) {
  const std::string m = error_of(fn);
  EXPECT_EQ(m.rfind("[op] f.x ", 0), 0u) << m;
  EXPECT_NE(m.find(expected), std::string::npos) << m;
}

}  // namespace

TEST(JsonInt, AcceptsIntegersInRange) {
  EXPECT_EQ(json_int(json(0), "op", "f.x"), 0);
  EXPECT_EQ(json_int(json(-7), "op", "f.x"), -7);
  const int64_t max = std::numeric_limits<int64_t>::max(), min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(json_int(json::parse("9223372036854775807"), "op", "f.x"), max);
  EXPECT_EQ(json_int(json::parse("-9223372036854775808"), "op", "f.x"), min);
  EXPECT_EQ(json_uint(json::parse("18446744073709551615"), "op", "f.x"),
            std::numeric_limits<uint64_t>::max());
}

TEST(JsonInt, RejectsFloatsStringsAndOutOfRange) {
  for (const char* text : {"2.5", "1e300", "-9e99", "3.48889e+32", "1.0"})
    expect_error([&] { json_int(json::parse(text), "op", "f.x"); },
                 "must be an integer, got a non-integer number");
  expect_error([&] { json_int(json("3"), "op", "f.x"); }, "got a string");
  expect_error([&] { json_int(json(nullptr), "op", "f.x"); }, "got a null");
  expect_error([&] { json_int(json::array({1}), "op", "f.x"); }, "got an array");
  // Parsed as uint64 by nlohmann; get<int64_t>() would wrap it to a negative number.
  expect_error([&] { json_int(json::parse("9223372036854775808"), "op", "f.x"); },
               "below 2^63");
  expect_error([&] { json_uint(json(-1), "op", "f.x"); }, "non-negative integer, got -1");
  expect_error([&] { json_uint(json(7.5), "op", "f.x"); }, "got a non-integer number");
}

TEST(JsonInt, OrFallsBackOnlyWhenAbsent) {
  const json j = {{"a", 3}, {"b", 2.5}};
  EXPECT_EQ(json_int_or(j, "a", -1, "op", "f.x"), 3);
  EXPECT_EQ(json_int_or(j, "c", -1, "op", "f.x"), -1);
  EXPECT_EQ(json_int_or(json::array(), "a", -1, "op", "f.x"), -1);
  expect_error([&] { json_int_or(j, "b", -1, "op", "f.x"); }, "must be an integer");
}

TEST(JsonInt, ListsHoldOnlyIntegers) {
  EXPECT_EQ(json_int_list(json::array({3, 1, 2}), "op", "f.x"), (std::vector<int64_t>{3, 1, 2}));
  EXPECT_TRUE(json_int_list(json::array(), "op", "f.x").empty());
  expect_error([&] { json_int_list(json::array({1, 2.5}), "op", "f.x"); }, "must be an integer");
  expect_error([&] { json_int_list(json(4), "op", "f.x"); }, "must be a list of integers");
}
