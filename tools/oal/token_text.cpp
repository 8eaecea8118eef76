#include "token_text.h"

#include <fmt/core.h>

#include <charconv>
#include <limits>

#include "oal/core/error.h"

namespace oal::cli {

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (0 when it is not one).
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return 0;
  return n;
}

}  // namespace

std::string escaped_piece(std::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    const size_t n = utf8_length(bytes, i);
    if (b == '\n') out += "\\n";
    else if (b == '\r') out += "\\r";
    else if (b == '\t') out += "\\t";
    else if (b == '\\') out += "\\\\";
    else if (b == '\'') out += "\\'";
    else if (n == 0 || b < 0x20 || b == 0x7F) out += fmt::format("\\x{:02X}", b);
    else {
      out.append(bytes.substr(i, n));
      i += n;
      continue;
    }
    ++i;
  }
  return out;
}

std::vector<int32_t> parse_token_ids(std::string_view text) {
  std::vector<int32_t> ids;
  auto sep = [](char c) { return c == ' ' || c == ',' || c == '\n' || c == '\r' || c == '\t'; };
  size_t i = 0, end = text.size();
  auto skip = [&] { while (i < end && sep(text[i])) ++i; };
  skip();
  const bool bracket = i < end && text[i] == '[';
  if (bracket) {
    size_t close = text.find_last_not_of(" \n\r\t");
    check(text[close] == ']', "detokenize", "'[' without a closing ']'");
    ++i, end = close;
  }
  for (skip(); i < end; skip()) {
    size_t j = i;
    while (j < end && !sep(text[j])) ++j;
    const std::string_view word = text.substr(i, j - i);
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
    check(ec == std::errc() && p == word.data() + word.size() && v >= 0 &&
              v <= std::numeric_limits<int32_t>::max(),
          "detokenize", "'{}' is not a token id (expected a non-negative integer)", word);
    ids.push_back(static_cast<int32_t>(v));
    i = j;
  }
  check(!ids.empty(), "detokenize", "no token ids given");
  return ids;
}

}  // namespace oal::cli
