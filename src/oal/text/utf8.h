#pragma once
// UTF-8 <-> code points, lenient in the way tokenizers need: a byte that does not
// start a valid sequence decodes as U+FFFD consuming one byte, so every input byte
// sequence can be walked without throwing.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace oal::text {

// Decodes the code point starting at text[pos]; sets `len` to the bytes consumed (>= 1).
char32_t utf8_next(std::string_view text, size_t pos, size_t& len);

// All code points of `text` (invalid bytes become U+FFFD).
std::vector<char32_t> utf8_decode(std::string_view text);

// Appends the UTF-8 encoding of `cp` to `out`.
void utf8_append(std::string& out, char32_t cp);

std::string utf8_encode(const std::vector<char32_t>& cps);

}  // namespace oal::text
