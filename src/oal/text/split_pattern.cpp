#include "oal/text/split_pattern.h"

#include <cstdint>

#include "oal/core/error.h"
#include "oal/text/unicode_tables.h"
#include "oal/text/utf8.h"

namespace oal::text {

namespace {
constexpr std::string_view k_qwen2_regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view k_llama3_regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr std::string_view k_gpt2_regex =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

// Per code point: its value, byte offset and character classes.
struct Char {
  char32_t cp;
  uint32_t offset;
  bool letter, number, space;
  bool crlf() const { return cp == '\r' || cp == '\n'; }
  bool other() const { return !letter && !number && !space; }  // [^\s\p{L}\p{N}]
};

std::vector<Char> classify(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0, len = 0; pos < text.size(); pos += len) {
    const char32_t cp = utf8_next(text, pos, len);
    chars.push_back(
        {cp, static_cast<uint32_t>(pos), is_letter(cp), is_number(cp), is_white_space(cp)});
  }
  return chars;
}

char32_t ascii_lower(char32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Each alternative returns the end of its match starting at i, or 0 for no match
// (a match is never empty, so 0 cannot be a real end when i < n).
struct Matcher {
  const std::vector<Char>& c;
  size_t n;
  size_t max_digits;  // 1 for Qwen2, 3 for Llama-3

  size_t run(size_t i, bool (*pred)(const Char&)) const {
    while (i < n && pred(c[i])) ++i;
    return i;
  }

  // (?i:'s|'t|'re|'ve|'m|'ll|'d) with ASCII case folding.
  size_t contraction(size_t i) const {
    if (c[i].cp != '\'' || i + 1 >= n) return 0;
    const char32_t a = ascii_lower(c[i + 1].cp);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 >= n) return 0;
    const char32_t b = ascii_lower(c[i + 2].cp);
    if ((a == 'r' || a == 'v') && b == 'e') return i + 3;
    if (a == 'l' && b == 'l') return i + 3;
    return 0;
  }

  // [^\r\n\p{L}\p{N}]?\p{L}+ : the optional prefix is tried first (greedy).
  size_t word(size_t i) const {
    auto letter = [](const Char& ch) { return ch.letter; };
    if (!c[i].crlf() && !c[i].letter && !c[i].number && i + 1 < n && c[i + 1].letter)
      return run(i + 1, letter);
    return c[i].letter ? run(i, letter) : 0;
  }

  // \p{N} or \p{N}{1,3}
  size_t digits(size_t i) const {
    size_t j = i;
    while (j < n && j - i < max_digits && c[j].number) ++j;
    return j > i ? j : 0;
  }

  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  size_t punctuation(size_t i) const {
    size_t j = i;
    if (c[i].cp == ' ' && i + 1 < n && c[i + 1].other()) j = i + 1;
    if (!c[j].other()) return 0;
    j = run(j, [](const Char& ch) { return ch.other(); });
    return run(j, [](const Char& ch) { return ch.crlf(); });
  }

  // \s*[\r\n]+ | \s+(?!\S) | \s+ , all starting inside one whitespace run [i, j).
  size_t whitespace(size_t i) const {
    if (!c[i].space) return 0;
    const size_t j = run(i, [](const Char& ch) { return ch.space; });
    // \s* backtracks to the last line break of the run; [\r\n]+ then ends right after it.
    for (size_t k = j; k > i; --k)
      if (c[k - 1].crlf()) return k;
    // \s+(?!\S): the whole run at end of text, else the run minus its last character.
    if (j == n) return j;
    if (j - i >= 2) return j - 1;
    return j;  // \s+
  }

  size_t match(size_t i) const {
    if (size_t e = contraction(i)) return e;
    if (size_t e = word(i)) return e;
    if (size_t e = digits(i)) return e;
    if (size_t e = punctuation(i)) return e;
    return whitespace(i);
  }
};

// GPT-2's pattern over chars [.., n): n is the end of the text, or for smollm the next
// digit (the stretch the regex sees after the digits were split off).
struct Gpt2Matcher {
  const std::vector<Char>& c;
  size_t n;

  size_t run(size_t i, bool (*pred)(const Char&)) const {
    while (i < n && pred(c[i])) ++i;
    return i;
  }

  // 's|'t|'re|'ve|'m|'ll|'d, lower case only.
  size_t contraction(size_t i) const {
    if (c[i].cp != '\'' || i + 1 >= n) return 0;
    const char32_t a = c[i + 1].cp;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 >= n) return 0;
    const char32_t b = c[i + 2].cp;
    if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
  }

  //  ?X+ for the class `pred`: an optional U+0020, then at least one X.
  size_t spaced_run(size_t i, bool (*pred)(const Char&)) const {
    const size_t j = (c[i].cp == ' ' && i + 1 < n) ? i + 1 : i;
    return pred(c[j]) ? run(j, pred) : 0;
  }

  // \s+(?!\S) | \s+ : the run to the stretch's end, else the run minus its last char.
  size_t whitespace(size_t i) const {
    if (!c[i].space) return 0;
    const size_t j = run(i, [](const Char& ch) { return ch.space; });
    if (j == n || j - i < 2) return j;
    return j - 1;
  }

  size_t match(size_t i) const {
    if (size_t e = contraction(i)) return e;
    if (size_t e = spaced_run(i, [](const Char& ch) { return ch.letter; })) return e;
    if (size_t e = spaced_run(i, [](const Char& ch) { return ch.number; })) return e;
    if (size_t e = spaced_run(i, [](const Char& ch) { return ch.other(); })) return e;
    return whitespace(i);
  }
};

// End of the regex's stretch starting at i: the next digit for smollm, else the end.
size_t stretch_end(const std::vector<Char>& chars, size_t i, SplitPattern pattern) {
  if (pattern != SplitPattern::smollm) return chars.size();
  while (i < chars.size() && !chars[i].number) ++i;
  return i;
}

}  // namespace

std::string_view split_pattern_regex(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::qwen2: return k_qwen2_regex;
    case SplitPattern::llama3: return k_llama3_regex;
    case SplitPattern::gpt2:
    case SplitPattern::smollm: return k_gpt2_regex;
  }
  return k_gpt2_regex;
}

SplitPattern split_pattern_from_regex(std::string_view regex) {
  if (regex == k_qwen2_regex) return SplitPattern::qwen2;
  if (regex == k_llama3_regex) return SplitPattern::llama3;
  fail("tokenizer.json pre_tokenizer",
       "unsupported Split regex '{}': supported are the Qwen2 pattern '{}' and the Llama-3 pattern "
       "'{}'",
       regex, k_qwen2_regex, k_llama3_regex);
}

namespace {
std::vector<std::string_view> split_gpt2(std::string_view text, const std::vector<Char>& chars,
                                         SplitPattern pattern) {
  std::vector<std::string_view> pieces;
  auto offset = [&](size_t i) { return i < chars.size() ? chars[i].offset : text.size(); };
  size_t i = 0;
  while (i < chars.size()) {
    size_t e = i + 1;  // a digit is its own piece (smollm)
    if (pattern != SplitPattern::smollm || !chars[i].number)
      e = Gpt2Matcher{chars, stretch_end(chars, i, pattern)}.match(i);
    pieces.push_back(text.substr(offset(i), offset(e) - offset(i)));
    i = e;
  }
  return pieces;
}
}  // namespace

std::vector<std::string_view> split_pretokens(std::string_view text, SplitPattern pattern) {
  const std::vector<Char> chars = classify(text);
  if (pattern == SplitPattern::gpt2 || pattern == SplitPattern::smollm)
    return split_gpt2(text, chars, pattern);
  const Matcher m{chars, chars.size(), pattern == SplitPattern::qwen2 ? size_t{1} : size_t{3}};
  std::vector<std::string_view> pieces;
  auto offset = [&](size_t i) { return i < chars.size() ? chars[i].offset : text.size(); };
  size_t i = 0;
  while (i < chars.size()) {
    // Every character class is covered by some alternative, so a match always exists
    // and there are no unmatched gaps for Isolated to emit.
    const size_t e = m.match(i);
    pieces.push_back(text.substr(offset(i), offset(e) - offset(i)));
    i = e;
  }
  return pieces;
}

}  // namespace oal::text
