#pragma once
// Unicode property tables generated at development time from Python's unicodedata by
// scripts/gen_unicode_tables.py into unicode_tables_data.cpp (the Unicode version is
// k_unicode_version). Only what the tokenizers need: \p{L}, \p{N}, \s and the data
// for NFC normalisation. Lookups are binary searches over sorted arrays.
#include <cstddef>
#include <cstdint>

namespace oal::text {

namespace tables {
struct CodeRange {
  char32_t lo, hi;  // inclusive
};
struct CccRange {
  char32_t lo, hi;  // inclusive
  uint8_t ccc;
};
struct Decomposition {
  char32_t cp, first, second;  // second == 0: singleton decomposition
};
struct Composition {
  char32_t first, second, composite;
};

extern const char* const k_unicode_version;
extern const CodeRange k_letter_ranges[];
extern const size_t k_letter_range_count;
extern const CodeRange k_number_ranges[];
extern const size_t k_number_range_count;
extern const char32_t k_white_space[];
extern const size_t k_white_space_count;
extern const CccRange k_ccc_ranges[];
extern const size_t k_ccc_range_count;
extern const Decomposition k_decompositions[];
extern const size_t k_decomposition_count;
extern const Composition k_compositions[];
extern const size_t k_composition_count;
}  // namespace tables

// General category L* (regex \p{L}).
bool is_letter(char32_t cp);
// General category N* (regex \p{N}).
bool is_number(char32_t cp);
// Unicode White_Space (regex \s in Oniguruma, which HF tokenizers uses).
bool is_white_space(char32_t cp);
// Canonical combining class (0 for starters).
uint8_t combining_class(char32_t cp);

}  // namespace oal::text
