#include "oal/text/hf_bpe_tokenizer.h"

#include <algorithm>

#include "oal/core/error.h"
#include "oal/text/bpe_merge.h"
#include "oal/text/byte_level.h"
#include "oal/text/unicode_nfc.h"

namespace oal::text {

namespace {
constexpr std::string_view k_op = "tokenizer.json";
constexpr size_t k_cache_max_entries = 1 << 18;  // cleared when full, bounds memory
constexpr size_t k_cache_max_piece = 256;        // longer pieces are rare; not cached

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

bool ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
}  // namespace

std::unique_ptr<HfBpeTokenizer> HfBpeTokenizer::load(const std::filesystem::path& path) {
  const HfBpeSpec spec = parse_tokenizer_json(path);
  try {
    return std::make_unique<HfBpeTokenizer>(spec);
  } catch (const Error& e) {
    const std::string what = e.what();
    const std::string prefix = fmt::format("[{}] ", k_op);
    fail(k_op, "'{}': {}", path.string(),
         what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
  }
}

HfBpeTokenizer::HfBpeTokenizer(const HfBpeSpec& spec)
    : nfc_(spec.nfc), ignore_merges_(spec.ignore_merges), split_(spec.split) {
  add_tokens(spec);
  add_merges(spec);
  if (!spec.bos_token.empty()) bos_id_ = token_id(spec.bos_token).value_or(-1);
  add_bos_ = spec.add_bos;
  if (!spec.eos_token.empty()) eos_id_ = token_id(spec.eos_token).value_or(-1);
}

void HfBpeTokenizer::add_tokens(const HfBpeSpec& spec) {
  int32_t max_id = -1;
  for (const auto& [tok, id] : spec.vocab) max_id = std::max(max_id, id);
  for (const auto& a : spec.added_tokens) max_id = std::max(max_id, a.id);
  // Tables are indexed by id, so ids must be about as dense as real vocabularies are
  // (Qwen2, Llama-3: 0..N-1 with no gap); a lone huge id would allocate gigabytes
  // (found by fuzz_tokenizer_json). The bound leaves room for sparse ids all the same.
  const int64_t listed = static_cast<int64_t>(spec.vocab.size() + spec.added_tokens.size());
  check(max_id < 2 * listed + 1024, k_op,
        "token id {} is far beyond the {} tokens listed; expected ids 0..N-1 of a dense "
        "vocabulary", max_id, listed);
  const size_t n = static_cast<size_t>(max_id) + 1;
  token_strings_.assign(n, {});
  token_bytes_.assign(n, {});
  has_token_.assign(n, false);
  special_.assign(n, false);
  auto set = [&](int32_t id, const std::string& s) {
    token_strings_[id] = s;
    // The ByteLevel decoder: characters back to bytes, or the string's own bytes when
    // it holds a character outside the mapping (as HF does).
    token_bytes_[id] = byte_level_to_bytes(s).value_or(s);
    has_token_[id] = true;
  };
  vocab_.reserve(spec.vocab.size() * 2);
  for (const auto& [tok, id] : spec.vocab) {
    check(vocab_.emplace(tok, id).second, k_op, "model.vocab lists '{}' twice", tok);
    set(id, tok);
  }
  // Printable ASCII must have byte tokens (else this is no byte-level vocabulary);
  // other bytes may lack one (SmolLM2 has none for 21 control and never-UTF-8 bytes):
  // encoding drops such a byte, as HF tokenizers (no unk, no byte fallback) and
  // llama.cpp do.
  for (int b = 0; b < 256; ++b) {
    const std::string ch = bytes_to_byte_level(std::string(1, static_cast<char>(b)));
    const auto it = vocab_.find(ch);
    check(it != vocab_.end() || b < 0x20 || b > 0x7e, k_op,
          "model.vocab has no token for byte 0x{:02X} ('{}'): not a byte-level vocabulary", b, ch);
    byte_ids_[b] = it != vocab_.end() ? it->second : -1;
  }
  added_ = spec.added_tokens;
  for (size_t i = 0; i < added_.size(); ++i) {
    set(added_[i].id, added_[i].content);
    special_[added_[i].id] = added_[i].special;
    added_by_first_byte_[static_cast<uint8_t>(added_[i].content[0])].push_back(static_cast<int>(i));
  }
  for (auto& list : added_by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [&](int a, int b) {
      return added_[a].content.size() > added_[b].content.size();
    });
}

void HfBpeTokenizer::add_merges(const HfBpeSpec& spec) {
  merges_.reserve(spec.merges.size() * 2);
  auto id_of = [&](const std::string& s, size_t rank) {
    const auto it = vocab_.find(s);
    check(it != vocab_.end(), k_op, "model.merges[{}]: token '{}' is not in model.vocab", rank, s);
    return it->second;
  };
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [a, b] = spec.merges[rank];
    const int32_t merged = id_of(a + b, rank);
    // A repeated pair keeps its first (best) rank, as HF does.
    merges_.emplace(pair_key(id_of(a, rank), id_of(b, rank)),
                    MergeRule{static_cast<int32_t>(rank), merged});
  }
}

std::pair<size_t, int> HfBpeTokenizer::find_added(std::string_view text, size_t from) const {
  if (added_.empty()) return {std::string_view::npos, -1};
  for (size_t i = from; i < text.size(); ++i) {
    for (int t : added_by_first_byte_[static_cast<uint8_t>(text[i])]) {
      const std::string& c = added_[t].content;
      if (text.compare(i, c.size(), c) == 0) return {i, t};
    }
  }
  return {std::string_view::npos, -1};
}

std::vector<int32_t> HfBpeTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> out;
  if (add_bos && add_bos_ && bos_id_ >= 0) out.push_back(bos_id_);
  size_t pos = 0;
  while (pos < text.size()) {
    const auto [at, t] = find_added(text, pos);
    if (t < 0) {
      encode_segment(text.substr(pos), out);
      break;
    }
    size_t seg_end = at, next = at + added_[t].content.size();
    if (added_[t].lstrip)
      while (seg_end > pos && ascii_space(text[seg_end - 1])) --seg_end;
    if (added_[t].rstrip)
      while (next < text.size() && ascii_space(text[next])) ++next;
    encode_segment(text.substr(pos, seg_end - pos), out);
    out.push_back(added_[t].id);
    pos = next;
  }
  return out;
}

void HfBpeTokenizer::encode_segment(std::string_view segment, std::vector<int32_t>& out) const {
  if (segment.empty()) return;
  std::string normalized;
  if (nfc_) {
    normalized = nfc(segment);
    segment = normalized;
  }
  if (!split_) {
    bpe_piece(segment, out);
    return;
  }
  for (std::string_view piece : split_pretokens(segment, *split_)) bpe_piece(piece, out);
}

void HfBpeTokenizer::bpe_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() > k_cache_max_piece) {
    const auto ids = bpe_piece_uncached(piece);
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  const std::string key(piece);
  {
    std::lock_guard lock(cache_mutex_);
    if (const auto it = cache_.find(key); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  auto ids = bpe_piece_uncached(piece);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard lock(cache_mutex_);
  if (cache_.size() >= k_cache_max_entries) cache_.clear();
  cache_.emplace(key, std::move(ids));
}

std::vector<int32_t> HfBpeTokenizer::byte_symbols(std::string_view piece) const {
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  for (char c : piece)
    if (const int32_t id = byte_ids_[static_cast<uint8_t>(c)]; id >= 0) symbols.push_back(id);
  return symbols;
}

std::vector<int32_t> HfBpeTokenizer::bpe_piece_uncached(std::string_view piece) const {
  if (ignore_merges_) {
    if (const auto it = vocab_.find(bytes_to_byte_level(piece)); it != vocab_.end())
      return {it->second};
  }
  std::vector<int32_t> symbols = byte_symbols(piece);
  merge_symbols(symbols, [&](int32_t a, int32_t b) -> Merge {
    const auto it = merges_.find(pair_key(a, b));
    if (it == merges_.end()) return {};
    return {true, static_cast<double>(it->second.rank), it->second.id};
  });
  return symbols;
}

std::vector<int32_t> HfBpeTokenizer::bpe_piece_reference(std::string_view piece) const {
  if (ignore_merges_) {
    if (const auto it = vocab_.find(bytes_to_byte_level(piece)); it != vocab_.end())
      return {it->second};
  }
  std::vector<int32_t> symbols = byte_symbols(piece);
  merge_symbols_reference(symbols, [&](int32_t a, int32_t b) -> Merge {
    const auto it = merges_.find(pair_key(a, b));
    if (it == merges_.end()) return {};
    return {true, static_cast<double>(it->second.rank), it->second.id};
  });
  return symbols;
}

std::string HfBpeTokenizer::decode_token(int32_t /*prev*/, int32_t id) const {
  check(id >= 0 && id < vocab_size() && has_token_[id], "tokenizer decode",
        "token id {} is not in the vocabulary (size {})", id, vocab_size());
  return token_bytes_[id];
}

const std::string& HfBpeTokenizer::token_string(int32_t id) const {
  check(id >= 0 && id < vocab_size() && has_token_[id], "tokenizer token_string",
        "token id {} is not in the vocabulary (size {})", id, vocab_size());
  return token_strings_[id];
}

std::optional<int32_t> HfBpeTokenizer::token_id(std::string_view token) const {
  for (const auto& a : added_)
    if (a.content == token) return a.id;
  if (const auto it = vocab_.find(std::string(token)); it != vocab_.end()) return it->second;
  return std::nullopt;
}

bool HfBpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[id];
}

}  // namespace oal::text
