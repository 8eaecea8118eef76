#include "oal/core/ranges.h"

#include <charconv>
#include <set>
#include <string>

#include "oal/core/error.h"

namespace oal {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A whole non-negative decimal integer, nothing else.
int64_t parse_number(std::string_view s, std::string_view item, std::string_view what) {
  s = trim(s);
  int64_t v = -1;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  check(!s.empty() && ec == std::errc() && end == s.data() + s.size() && v >= 0, what,
        "'{}': expected a non-negative integer or a range like 4-7", item);
  return v;
}

}  // namespace

std::vector<int64_t> parse_index_list(std::string_view text, std::string_view what,
                                      int64_t limit) {
  check(!trim(text).empty(), what, "empty list; expected indices like 0,2,4-7");
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = trim(text.substr(start, comma - start));
    check(!item.empty(), what, "'{}': empty item; expected indices like 0,2,4-7", text);
    size_t dash = item.find('-');
    int64_t lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      lo = hi = parse_number(item, item, what);
    } else {
      lo = parse_number(item.substr(0, dash), item, what);
      hi = parse_number(item.substr(dash + 1), item, what);
      check(lo <= hi, what, "'{}': range runs backwards; expected a-b with a <= b", item);
    }
    check(limit <= 0 || hi < limit, what, "'{}': index {} out of range; expected 0..{}", item,
          hi, limit - 1);
    for (int64_t i = lo; i <= hi; ++i) {
      check(seen.insert(i).second, what, "index {} listed twice in '{}'", i, text);
      out.push_back(i);
    }
    start = comma + 1;
  }
  return out;
}

std::string format_index_list(const std::vector<int64_t>& indices) {
  std::string s;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(indices[i]);
    if (j > i) s += "-" + std::to_string(indices[j]);
    i = j + 1;
  }
  return s;
}

std::vector<std::string> split_names(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace oal
