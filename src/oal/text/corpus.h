#pragma once
// Text corpora for the model, analysis and fitting code: whole files, prompts
// (blank-line separated paragraphs), and token streams cut into fixed-length blocks
// (the paper's App. F.3 protocol: non-overlapping blocks, incomplete tail dropped).
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace oal::text {

// The whole file as bytes. Throws "[read text] ..." when it is missing, unreadable or empty.
std::string read_text_file(const std::filesystem::path& path);

// Paragraphs separated by one or more blank (empty or whitespace-only) lines, each
// trimmed of surrounding whitespace, line breaks inside kept ("\r\n" read as "\n").
// Text with no blank line between its lines (a file whose blank lines were stripped,
// such as ../shared/data/wikitext2-test.raw) gives one paragraph per non-blank line.
// Text with no non-blank line gives an empty list.
std::vector<std::string> split_paragraphs(std::string_view text);

// Half-open range [begin, end) of block indices; end == -1 means "to the last block".
struct BlockRange {
  int64_t begin = 0;
  int64_t end = -1;
};

// Parses "A:B" (blocks A..B-1), "A:" (A to the end), ":B", "A-B" (blocks A..B inclusive,
// the form of the index lists other commands take), "A" (just block A), "" or "all"
// (every block). Throws "[block range] ..." on anything else.
BlockRange parse_block_range(std::string_view spec);

// Number of complete blocks of `block_len` tokens in `token_count` tokens.
int64_t block_count(int64_t token_count, int64_t block_len);

// Blocks [range.begin, range.end) of `tokens` cut into consecutive non-overlapping
// blocks of `block_len` tokens, the incomplete tail dropped. Throws "[make blocks] ..."
// when block_len < 1, the stream is shorter than one block (naming both counts), or
// the range is empty or past the available blocks.
std::vector<std::vector<int32_t>> make_blocks(const std::vector<int32_t>& tokens, int64_t block_len,
                                              BlockRange range = {});

}  // namespace oal::text
