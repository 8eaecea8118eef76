#pragma once
// The Split pre-tokenizer of HF tokenizer.json (behavior "Isolated"), for exactly the
// regular expressions that Qwen2 and Llama-3 tokenizers use. std::regex has no \p{L} /
// \p{N}, so each supported pattern is matched by hand-written code that follows the
// regex's leftmost-first alternation and greedy backtracking semantics (see
// docs/tokenizers.md). An unknown pattern string is rejected with an error.
#include <string_view>
#include <vector>

namespace oal::text {

enum class SplitPattern {
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
  // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  qwen2,
  // the same with \p{N}{1,3} (digit runs of up to three)
  llama3,
  // GPT-2's ByteLevel regex (case-sensitive contractions):
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  gpt2,
  // SmolLM / StarCoder: every \p{N} character its own piece first (HF Digits with
  // individual_digits; llama.cpp pre-tokenizer "smollm"), then gpt2 on the rest, each
  // stretch between two digits on its own (a lookahead there sees the stretch's end).
  smollm,
};

// The exact pattern string (as it appears in tokenizer.json after JSON unescaping;
// smollm: the gpt2 pattern, which runs after the digits are split off).
std::string_view split_pattern_regex(SplitPattern pattern);

// Recognises `regex`; throws oal::Error naming the pattern when it is not supported.
SplitPattern split_pattern_from_regex(std::string_view regex);

// Splits UTF-8 `text` into consecutive non-empty pieces covering all of it: every
// regex match, plus (behavior Isolated) any unmatched gap as its own piece. The pieces
// are views into `text`, so bytes are preserved even for invalid UTF-8.
std::vector<std::string_view> split_pretokens(std::string_view text, SplitPattern pattern);

}  // namespace oal::text
