#include "oal/text/corpus.h"

#include <charconv>
#include <fstream>
#include <iterator>

#include "oal/core/error.h"

namespace oal::text {

namespace {
bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\f\v") == std::string_view::npos;
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n\f\v");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n\f\v") - b + 1);
}

int64_t parse_index(std::string_view s, std::string_view spec) {
  int64_t v = -1;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  check(ec == std::errc() && ptr == s.data() + s.size() && v >= 0, "block range",
        "'{}': expected A:B, A:, :B, A-B, A or all with non-negative integers", spec);
  return v;
}
}  // namespace

std::string read_text_file(const std::filesystem::path& path) {
  check(std::filesystem::is_regular_file(path), "read text", "'{}' is not a readable file",
        path.string());
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "read text", "cannot open '{}'", path.string());
  std::string text(std::istreambuf_iterator<char>(in), {});
  check(!text.empty(), "read text", "'{}' is empty: expected some text", path.string());
  return text;
}

namespace {

// The trimmed non-blank lines of `text`: the paragraphs of a text whose blank lines
// were stripped (one paragraph per line, as the WikiText-2 copy in ../shared/data).
std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view t = trim(text.substr(pos, eol - pos));
    if (!t.empty()) out.emplace_back(t);
    pos = eol + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> split_paragraphs(std::string_view text) {
  std::vector<std::string> out;
  std::string current;
  auto flush = [&] {
    const std::string_view t = trim(current);
    if (!t.empty()) out.emplace_back(t);
    current.clear();
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (is_blank(line)) {
      flush();
    } else {
      if (!current.empty()) current += '\n';
      current += line;
    }
    pos = eol + 1;
  }
  flush();
  if (out.size() == 1 && out[0].find('\n') != std::string::npos) return lines_of(out[0]);
  return out;
}

BlockRange parse_block_range(std::string_view spec) {
  if (spec.empty() || spec == "all") return {};
  const size_t colon = spec.find(':'), dash = spec.find('-');
  if (colon == std::string_view::npos && dash != std::string_view::npos && dash > 0) {
    // "A-B": inclusive, the index-list form `oal calibrate --train-blocks` takes.
    const int64_t a = parse_index(spec.substr(0, dash), spec);
    const int64_t b = parse_index(spec.substr(dash + 1), spec);
    check(b >= a, "block range", "'{}': end must not be below begin", spec);
    return {a, b + 1};
  }
  if (colon == std::string_view::npos) {
    const int64_t a = parse_index(spec, spec);
    return {a, a + 1};
  }
  BlockRange r;
  if (colon > 0) r.begin = parse_index(spec.substr(0, colon), spec);
  if (colon + 1 < spec.size()) r.end = parse_index(spec.substr(colon + 1), spec);
  check(r.end < 0 || r.end > r.begin, "block range", "'{}': end must be greater than begin", spec);
  return r;
}

int64_t block_count(int64_t token_count, int64_t block_len) {
  check(block_len >= 1, "make blocks", "block length must be at least 1, got {}", block_len);
  return token_count / block_len;
}

std::vector<std::vector<int32_t>> make_blocks(const std::vector<int32_t>& tokens, int64_t block_len,
                                              BlockRange range) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t available = block_count(n, block_len);
  check(available >= 1, "make blocks",
        "need at least {} tokens for one block of {}, the stream has {}", block_len, block_len, n);
  const int64_t end = range.end < 0 ? available : range.end;
  check(range.begin >= 0 && range.begin < end && end <= available, "make blocks",
        "block range [{}, {}) is outside the {} available blocks of {} tokens ({} tokens)",
        range.begin, end, available, block_len, n);
  std::vector<std::vector<int32_t>> blocks;
  blocks.reserve(static_cast<size_t>(end - range.begin));
  for (int64_t b = range.begin; b < end; ++b)
    blocks.emplace_back(tokens.begin() + b * block_len, tokens.begin() + (b + 1) * block_len);
  return blocks;
}

}  // namespace oal::text
