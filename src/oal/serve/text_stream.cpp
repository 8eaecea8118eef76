#include "oal/serve/text_stream.h"

#include <algorithm>

namespace oal::serve {
namespace {

// Bytes of the character a lead byte starts (0: not a valid lead byte).
int utf8_length(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The valid character's length at s[i] (0 when the bytes there are not one).
size_t valid_char_at(const std::string& s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const int n = utf8_length(c);
  if (n == 0 || i + n > s.size()) return 0;
  for (int k = 1; k < n; ++k)
    if (!is_continuation(static_cast<unsigned char>(s[i + k]))) return 0;
  if (n >= 3) {  // overlong forms and surrogates
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
        (c == 0xF4 && c1 > 0x8F))
      return 0;
  }
  return n;
}

}  // namespace

size_t utf8_complete_prefix(const std::string& s) {
  // Look back at most 3 bytes for a lead byte whose character is not complete yet.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if (is_continuation(c)) continue;
    const int len = utf8_length(c);
    return len > static_cast<int>(back) ? n - back : n;
  }
  return n;
}

std::string utf8_sanitize(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = valid_char_at(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

TextStream::TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {}

std::string TextStream::release(size_t end) {
  std::string out = text_.substr(sent_.size(), end - sent_.size());
  sent_ += out;
  return out;
}

std::string TextStream::push(const std::string& piece) {
  if (stopped_) return {};
  const size_t searched_from = sent_.size();
  text_ += piece;
  // A stop string can only begin after what was sent (held-back text covers its start).
  size_t first = std::string::npos;
  for (const auto& s : stop_) first = std::min(first, text_.find(s, searched_from));
  if (first != std::string::npos) {
    stopped_ = true;
    text_.resize(first);
    return utf8_sanitize(release(first));
  }
  // Hold back the longest ending that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const auto& s : stop_)
    for (size_t k = std::min(s.size() - 1, text_.size() - searched_from); k > hold; --k)
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  const size_t end =
      std::max(searched_from, utf8_complete_prefix(text_.substr(0, text_.size() - hold)));
  return utf8_sanitize(release(end));
}

std::string TextStream::finish() {
  if (stopped_) return {};
  return utf8_sanitize(release(text_.size()));
}

}  // namespace oal::serve
