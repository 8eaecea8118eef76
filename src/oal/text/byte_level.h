#pragma once
// The GPT-2 "ByteLevel" byte <-> unicode mapping used by byte-level BPE vocabularies:
// printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) map to the code point of the same
// value; the other 68 bytes map, in increasing byte order, to U+0100, U+0101, ...
// So every byte is one visible character and a vocabulary string is a sequence of them.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace oal::text {

// Code point that stands for `byte`.
char32_t byte_to_unicode(uint8_t byte);

// Byte that code point `cp` stands for, or nullopt when `cp` is not in the mapping.
std::optional<uint8_t> unicode_to_byte(char32_t cp);

// UTF-8 string of the mapped characters of every byte of `bytes`.
std::string bytes_to_byte_level(std::string_view bytes);

// Inverse of bytes_to_byte_level; nullopt when `text` holds a character outside the
// mapping (such a vocabulary entry cannot come from bytes).
std::optional<std::string> byte_level_to_bytes(std::string_view text);

}  // namespace oal::text
