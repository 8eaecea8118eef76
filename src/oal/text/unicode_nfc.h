#pragma once
// Unicode Normalization Form C (UAX #15): canonical decomposition, canonical ordering,
// canonical composition. Tables come from unicode_tables_data.cpp (generated); Hangul
// syllables are handled algorithmically. Used by tokenizer.json normalizer "NFC".
#include <string>
#include <string_view>

namespace oal::text {

// NFC of UTF-8 `text`. Text made only of code points below U+0300 is returned
// unchanged without decoding (it is always in NFC). Invalid UTF-8 bytes become U+FFFD.
std::string nfc(std::string_view text);

}  // namespace oal::text
