#include "oal/text/byte_level.h"

#include "oal/text/utf8.h"

namespace oal::text {

namespace {
bool printable(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 512> to_byte{};  // every mapped code point is below U+0200
  Tables() {
    to_byte.fill(-1);
    char32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      to_cp[b] = printable(b) ? b : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}
}  // namespace

char32_t byte_to_unicode(uint8_t byte) { return tables().to_cp[byte]; }

std::optional<uint8_t> unicode_to_byte(char32_t cp) {
  if (cp >= 512 || tables().to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().to_byte[cp]);
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) utf8_append(out, byte_to_unicode(static_cast<uint8_t>(ch)));
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0, len = 0; pos < text.size(); pos += len) {
    const auto b = unicode_to_byte(utf8_next(text, pos, len));
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace oal::text
