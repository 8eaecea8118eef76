#include "oal/text/spm_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>

#include "oal/core/error.h"

namespace oal::text {
namespace {

constexpr std::string_view k_op = "spm tokenizer";
constexpr std::string_view k_space = "\xe2\x96\x81";  // U+2581, SentencePiece's space

// "<0xAB>" -> 0xAB, or -1 when `s` is not a byte token's text.
int parse_byte_token(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(s[3]), lo = hex(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Bytes of the UTF-8 sequence a lead byte starts, from its high nibble (llama.cpp's
// unicode_len_utf8): continuation and invalid bytes count as 1.
size_t utf8_sequence_length(uint8_t lead) {
  static constexpr size_t k_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return k_len[lead >> 4];
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t i = 0;
  while (true) {
    const size_t j = s.find(from, i);
    out.append(s.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) return out;
    out.append(to);
    i = j + from.size();
  }
}

// One symbol of the merge list (llama.cpp's llm_symbol): bytes [start, start + n) of the
// piece, linked to its live neighbours; n = 0 once merged into its left neighbour.
struct Symbol {
  size_t start = 0, n = 0;
  int prev = -1, next = -1;
};

// A candidate merge of symbols left and right (adjacent when pushed).
struct Bigram {
  int left = 0, right = 0;
  float score = 0;
  size_t size = 0;  // bytes of the merged text: stale when the symbols changed since
};

// Highest score first; on equal scores the leftmost pair (llama.cpp's comparator).
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

SpmTokenizer::SpmTokenizer(SpmVocab vocab)
    : vocab_(std::move(vocab)), byte_ids_(256, -1), added_first_(256, false) {
  const size_t n = vocab_.tokens.size();
  check(n > 0, k_op, "the vocabulary is empty");
  check(vocab_.scores.size() == n && vocab_.types.size() == n, k_op,
        "{} tokens but {} scores and {} token types: expected one of each per token", n,
        vocab_.scores.size(), vocab_.types.size());
  for (int32_t special : {vocab_.bos, vocab_.eos, vocab_.unk})
    check(special >= -1 && special < static_cast<int64_t>(n), k_op,
          "special token id {} outside the vocabulary of {}", special, n);
  for (size_t id = 0; id < n; ++id) {
    const std::string& t = vocab_.tokens[id];
    check(ids_.emplace(t, static_cast<int32_t>(id)).second, k_op,
          "token {} '{}' repeats an earlier token", id, t);
    const SpmTokenType type = vocab_.types[id];
    if (type == SpmTokenType::byte) {
      const int b = parse_byte_token(t);
      check(b >= 0, k_op, "token {} '{}' is a byte token but not of the form <0xAB>", id, t);
    }
    if ((type == SpmTokenType::control || type == SpmTokenType::user_defined) && !t.empty()) {
      added_.push_back(static_cast<int32_t>(id));
      added_first_[static_cast<uint8_t>(t[0])] = true;
    }
  }
  // llama.cpp's byte_to_token: "<0xAB>" when the vocabulary has it, else the raw byte.
  for (int b = 0; b < 256; ++b) {
    if (auto it = ids_.find(fmt::format("<0x{:02X}>", b)); it != ids_.end())
      byte_ids_[b] = it->second;
    else if (auto raw = ids_.find(std::string(1, static_cast<char>(b))); raw != ids_.end())
      byte_ids_[b] = raw->second;
  }
  std::stable_sort(added_.begin(), added_.end(), [this](int32_t a, int32_t b) {
    return vocab_.tokens[a].size() > vocab_.tokens[b].size();
  });
}

const std::string& SpmTokenizer::token_string(int32_t id) const {
  check(id >= 0 && id < vocab_size(), k_op, "token id {} outside the vocabulary of {}", id,
        vocab_size());
  return vocab_.tokens[id];
}

std::optional<int32_t> SpmTokenizer::token_id(std::string_view token) const {
  auto it = ids_.find(std::string(token));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

int32_t SpmTokenizer::byte_token(uint8_t byte) const {
  if (byte_ids_[byte] >= 0) return byte_ids_[byte];
  check(vocab_.unk >= 0, k_op,
        "byte 0x{:02X} has no token (no <0x{:02X}> entry, no unknown token): the vocabulary "
        "cannot encode this text",
        byte, byte);
  return vocab_.unk;
}

void SpmTokenizer::emit_symbol(std::string_view symbol, std::vector<int32_t>& out) const {
  if (auto it = ids_.find(std::string(symbol)); it != ids_.end()) {
    out.push_back(it->second);
    return;
  }
  for (char c : symbol) out.push_back(byte_token(static_cast<uint8_t>(c)));
}

void SpmTokenizer::encode_piece(std::string_view piece, bool prefix_space,
                                std::vector<int32_t>& out) const {
  const std::string text = replace_all(prefix_space ? " " + std::string(piece) : std::string(piece),
                                       " ", k_space);
  std::vector<Symbol> symbols;
  for (size_t offs = 0; offs < text.size();) {
    // A malformed lead byte counts as one byte (as llama.cpp's unicode_len_utf8 does).
    const size_t len =
        std::min(utf8_sequence_length(static_cast<uint8_t>(text[offs])), text.size() - offs);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({offs, len, index - 1, offs + len == text.size() ? -1 : index + 1});
    offs += len;
  }
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view merged(text.data() + symbols[left].start,
                                  symbols[left].n + symbols[right].n);
    auto it = ids_.find(std::string(merged));
    if (it == ids_.end()) return;
    queue.push({left, right, vocab_.scores[it->second], merged.size()});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale: a side merged since
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next)
    emit_symbol(std::string_view(text.data() + symbols[i].start, symbols[i].n), out);
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> out;
  if (add_bos && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  bool after_added = true;  // llama.cpp: the first piece is prefixed like one after a special token
  size_t piece_start = 0, i = 0;
  while (i < text.size()) {
    int32_t match = -1;
    if (!added_first_[static_cast<uint8_t>(text[i])]) {
      ++i;
      continue;
    }
    for (int32_t id : added_) {
      const std::string& t = vocab_.tokens[id];
      if (text.compare(i, t.size(), t) == 0) {
        match = id;
        break;  // longest first
      }
    }
    if (match < 0) {
      ++i;
      continue;
    }
    if (i > piece_start) {
      encode_piece(text.substr(piece_start, i - piece_start),
                   vocab_.add_space_prefix && after_added, out);
    }
    out.push_back(match);
    after_added = true;
    i += vocab_.tokens[match].size();
    piece_start = i;
  }
  if (piece_start < text.size())
    encode_piece(text.substr(piece_start), vocab_.add_space_prefix && after_added, out);
  return out;
}

std::string SpmTokenizer::decode_token(int32_t prev, int32_t id) const {
  const std::string& t = token_string(id);
  if (prev >= 0) (void)token_string(prev);
  switch (vocab_.types[id]) {
    case SpmTokenType::control:
    case SpmTokenType::unused:
      return "";
    case SpmTokenType::byte:
      return std::string(1, static_cast<char>(parse_byte_token(t)));
    case SpmTokenType::unknown:
      return "\xe2\x96\x85";  // llama.cpp prints U+2585 for the unknown token
    default:
      break;
  }
  std::string s = replace_all(t, k_space, " ");
  // The space the encoder put in front of the text or after an added token.
  const bool prefixed = prev < 0 || vocab_.types[prev] == SpmTokenType::control ||
                        vocab_.types[prev] == SpmTokenType::user_defined;
  if (vocab_.add_space_prefix && prefixed && !s.empty() && s[0] == ' ') s.erase(0, 1);
  return s;
}

}  // namespace oal::text
