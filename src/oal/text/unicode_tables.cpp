#include "oal/text/unicode_tables.h"

#include <algorithm>

namespace oal::text {

namespace {
template <typename Range>
const Range* find_range(const Range* begin, size_t count, char32_t cp) {
  const Range* end = begin + count;
  // First range whose upper bound is >= cp; it contains cp iff its lower bound <= cp.
  const Range* it =
      std::lower_bound(begin, end, cp, [](const Range& r, char32_t c) { return r.hi < c; });
  return (it != end && it->lo <= cp) ? it : nullptr;
}
}  // namespace

bool is_letter(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return find_range(tables::k_letter_ranges, tables::k_letter_range_count, cp) != nullptr;
}

bool is_number(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return find_range(tables::k_number_ranges, tables::k_number_range_count, cp) != nullptr;
}

bool is_white_space(char32_t cp) {
  const char32_t* end = tables::k_white_space + tables::k_white_space_count;
  return std::binary_search(tables::k_white_space, end, cp);
}

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const auto* r = find_range(tables::k_ccc_ranges, tables::k_ccc_range_count, cp);
  return r ? r->ccc : 0;
}

}  // namespace oal::text
