// Unicode tables, UTF-8, NFC and the ByteLevel mapping on hand-checked values
// (UAX #15 examples, code charts).
#include <gtest/gtest.h>

#include "oal/text/byte_level.h"
#include "oal/text/unicode_nfc.h"
#include "oal/text/unicode_tables.h"
#include "oal/text/utf8.h"

namespace oal::text {
namespace {

TEST(UnicodeTables, Categories) {
  EXPECT_STREQ(tables::k_unicode_version, "14.0.0");
  for (char32_t c : {U'a', U'Z', U'\u00E9', U'\u4E2D', U'\u0416', U'\u02B0' /* Lm */, U'\U00020000'})
    EXPECT_TRUE(is_letter(c)) << static_cast<uint32_t>(c);
  for (char32_t c : {U'1', U' ', U'_', U'\u0301', U'\u00BD', U'\U0001F916'})
    EXPECT_FALSE(is_letter(c)) << static_cast<uint32_t>(c);
  for (char32_t c : {U'0', U'9', U'\u00BD' /* No */, U'\u0663' /* Nd */, U'\u2167' /* Nl */, U'\u00B2'})
    EXPECT_TRUE(is_number(c)) << static_cast<uint32_t>(c);
  EXPECT_FALSE(is_number(U'x'));
  for (char32_t c : {U' ', U'\t', U'\n', U'\r', U'\v', U'\f', U'\u0085', U'\u00A0', U'\u2003', U'\u3000'})
    EXPECT_TRUE(is_white_space(c)) << static_cast<uint32_t>(c);
  for (char32_t c : {U'\u200B', U'x', U'\u001C'}) EXPECT_FALSE(is_white_space(c)) << static_cast<uint32_t>(c);
  EXPECT_EQ(combining_class(U'\u0301'), 230);
  EXPECT_EQ(combining_class(U'\u0323'), 220);
  EXPECT_EQ(combining_class(U'a'), 0);
}

TEST(Utf8, DecodesAndReplacesInvalidBytes) {
  EXPECT_EQ(utf8_decode("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\xA4\x96"),
            (std::vector<char32_t>{U'a', U'\u00E9', U'\u4E2D', U'\U0001F916'}));
  EXPECT_EQ(utf8_decode("\xC0\xAF"), (std::vector<char32_t>{0xFFFD, 0xFFFD}));  // overlong
  EXPECT_EQ(utf8_decode("\xE4\xB8"), (std::vector<char32_t>{0xFFFD, 0xFFFD}));  // truncated
  EXPECT_EQ(utf8_decode("\xED\xA0\x80"), (std::vector<char32_t>{0xFFFD, 0xFFFD, 0xFFFD}));  // surrogate
  EXPECT_EQ(utf8_encode({U'a', U'\u00E9', U'\u4E2D', U'\U0001F916'}), "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\xA4\x96");
}

TEST(Nfc, ComposesReordersAndExcludes) {
  EXPECT_EQ(nfc("cafe\xCC\x81"), "caf\xC3\xA9");                     // e + U+0301 -> U+00E9
  EXPECT_EQ(nfc("caf\xC3\xA9"), "caf\xC3\xA9");                      // already NFC
  EXPECT_EQ(nfc("\xE1\xB8\x8B\xCC\xA3"), "\xE1\xB8\x8D\xCC\x87");    // U+1E0B U+0323 -> U+1E0D U+0307
  EXPECT_EQ(nfc("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");          // reordered by class, no composite
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                        // U+212B ANGSTROM -> U+00C5
  EXPECT_EQ(nfc("\xE2\x84\xA6"), "\xCE\xA9");                        // U+2126 OHM -> U+03A9
  EXPECT_EQ(nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");        // U+0958 excluded: stays decomposed
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // Hangul L V T -> U+AC01
  EXPECT_EQ(nfc("\xEA\xB0\x81"), "\xEA\xB0\x81");
  EXPECT_EQ(nfc("\xCC\x81" "a"), "\xCC\x81" "a");                    // leading combining mark
  EXPECT_EQ(nfc("A\xCC\x8A\xCC\x81"), "\xC7\xBA");                   // A + ring + acute -> U+01FA
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc(""), "");
}

TEST(ByteLevel, MappingMatchesGpt2Table) {
  EXPECT_EQ(byte_to_unicode('A'), U'A');
  EXPECT_EQ(byte_to_unicode(' '), U'\u0120');   // "Ġ"
  EXPECT_EQ(byte_to_unicode('\n'), U'\u010A');  // "Ċ"
  EXPECT_EQ(byte_to_unicode(0x00), U'\u0100');
  EXPECT_EQ(byte_to_unicode(0x7F), U'\u0121');
  EXPECT_EQ(byte_to_unicode(0xAD), U'\u0143');
  EXPECT_EQ(byte_to_unicode(0xFF), U'\u00FF');
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode_to_byte(byte_to_unicode(static_cast<uint8_t>(b))), b);
  EXPECT_FALSE(unicode_to_byte(U' ').has_value());
  EXPECT_EQ(bytes_to_byte_level(" hi\n"), "\xC4\xA0hi\xC4\x8A");
  EXPECT_EQ(byte_level_to_bytes("\xC4\xA0hi\xC4\x8A"), " hi\n");
  EXPECT_FALSE(byte_level_to_bytes("a b").has_value());
}

}  // namespace
}  // namespace oal::text
