#include "oal/text/unicode_nfc.h"

#include <algorithm>
#include <vector>

#include "oal/text/unicode_tables.h"
#include "oal/text/utf8.h"

namespace oal::text {

namespace {
// Hangul syllable arithmetic (Unicode ch. 3.12).
constexpr char32_t k_s_base = 0xAC00, k_l_base = 0x1100, k_v_base = 0x1161, k_t_base = 0x11A7;
constexpr char32_t k_l_count = 19, k_v_count = 21, k_t_count = 28;
constexpr char32_t k_n_count = k_v_count * k_t_count, k_s_count = k_l_count * k_n_count;

const tables::Decomposition* find_decomposition(char32_t cp) {
  const auto* begin = tables::k_decompositions;
  const auto* end = begin + tables::k_decomposition_count;
  const auto* it = std::lower_bound(
      begin, end, cp, [](const tables::Decomposition& d, char32_t c) { return d.cp < c; });
  return (it != end && it->cp == cp) ? it : nullptr;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= k_s_base && cp < k_s_base + k_s_count) {
    const char32_t s = cp - k_s_base;
    out.push_back(k_l_base + s / k_n_count);
    out.push_back(k_v_base + (s % k_n_count) / k_t_count);
    if (s % k_t_count != 0) out.push_back(k_t_base + s % k_t_count);
    return;
  }
  const auto* d = find_decomposition(cp);
  if (!d) {
    out.push_back(cp);
    return;
  }
  decompose(d->first, out);  // mappings are applied recursively
  if (d->second != 0) decompose(d->second, out);
}

// Stable sort of each run of non-starters by combining class.
void canonical_order(std::vector<char32_t>& cps) {
  size_t i = 0;
  while (i < cps.size()) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j, [](char32_t a, char32_t b) {
      return combining_class(a) < combining_class(b);
    });
    i = j;
  }
}

// Primary composite of (a, b), or 0.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= k_l_base && a < k_l_base + k_l_count && b >= k_v_base && b < k_v_base + k_v_count)
    return k_s_base + ((a - k_l_base) * k_v_count + (b - k_v_base)) * k_t_count;
  if (a >= k_s_base && a < k_s_base + k_s_count && (a - k_s_base) % k_t_count == 0 &&
      b > k_t_base && b < k_t_base + k_t_count)
    return a + (b - k_t_base);
  const auto* begin = tables::k_compositions;
  const auto* end = begin + tables::k_composition_count;
  const auto* it =
      std::lower_bound(begin, end, std::pair{a, b}, [](const tables::Composition& c, auto key) {
        return c.first < key.first || (c.first == key.first && c.second < key.second);
      });
  return (it != end && it->first == a && it->second == b) ? it->composite : 0;
}

// Canonical composition: each character composes with the last starter unless a
// character of equal or higher class (or a starter) stands between them (blocked).
void compose(std::vector<char32_t>& cps) {
  if (cps.empty()) return;
  size_t starter = 0;
  bool have_starter = combining_class(cps[0]) == 0;
  int last_ccc = have_starter ? 0 : 256;
  size_t out = 1;
  for (size_t i = 1; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const int ccc = combining_class(c);
    const bool blocked = out - 1 != starter && (last_ccc == 0 || last_ccc >= ccc);
    if (have_starter && !blocked) {
      if (char32_t comp = compose_pair(cps[starter], c)) {
        cps[starter] = comp;
        continue;
      }
    }
    if (ccc == 0) {
      starter = out;
      have_starter = true;
    }
    last_ccc = ccc;
    cps[out++] = c;
  }
  cps.resize(out);
}
}  // namespace

std::string nfc(std::string_view text) {
  bool all_low = true;
  for (size_t pos = 0, len = 0; pos < text.size() && all_low; pos += len) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      len = 1;
      continue;
    }
    all_low = utf8_next(text, pos, len) < 0x300;
  }
  if (all_low) return std::string(text);
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (size_t pos = 0, len = 0; pos < text.size(); pos += len)
    decompose(utf8_next(text, pos, len), cps);
  canonical_order(cps);
  compose(cps);
  return utf8_encode(cps);
}

}  // namespace oal::text
