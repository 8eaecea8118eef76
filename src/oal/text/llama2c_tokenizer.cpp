#include "oal/text/llama2c_tokenizer.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "oal/core/error.h"
#include "oal/text/bpe_merge.h"

namespace oal::text {

namespace {
constexpr std::string_view k_op = "llama2c tokenizer";

std::string read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), k_op, "cannot open '{}'", path.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

template <typename T>
T read_pod(const std::string& bytes, size_t& pos) {
  T v;
  std::memcpy(&v, bytes.data() + pos, sizeof(T));
  pos += sizeof(T);
  return v;
}

bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// "<0xNN>" -> NN, else -1.
int parse_byte_token(const std::string& s) {
  if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = s[i];
    const int d = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                           : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}
}  // namespace

std::unique_ptr<Llama2cTokenizer> Llama2cTokenizer::load(const std::filesystem::path& path,
                                                         Llama2cInput input) {
  const std::string bytes = read_file_bytes(path);
  check(bytes.size() >= 4, k_op, "'{}': expected at least a 4-byte header, file has {} bytes",
        path.string(), bytes.size());
  size_t pos = 0;
  const auto max_len = read_pod<int32_t>(bytes, pos);
  check(max_len > 0, k_op, "'{}': max_token_length must be positive, file says {}", path.string(),
        max_len);
  std::vector<std::string> vocab;
  std::vector<float> scores;
  while (pos < bytes.size()) {
    const size_t id = vocab.size();
    check(bytes.size() - pos >= 8, k_op,
          "'{}' truncated in token {}: expected 8 bytes of score and length, {} left",
          path.string(), id, bytes.size() - pos);
    const auto score = read_pod<float>(bytes, pos);
    const auto len = read_pod<int32_t>(bytes, pos);
    check(std::isfinite(score), k_op, "'{}' token {}: score is not finite", path.string(), id);
    check(len >= 0 && len <= max_len, k_op,
          "'{}' token {}: length {} outside [0, max_token_length {}]", path.string(), id, len,
          max_len);
    check(bytes.size() - pos >= static_cast<size_t>(len), k_op,
          "'{}' truncated in token {}: expected {} bytes of text, {} left", path.string(), id, len,
          bytes.size() - pos);
    vocab.emplace_back(bytes.data() + pos, static_cast<size_t>(len));
    scores.push_back(score);
    pos += static_cast<size_t>(len);
  }
  return std::make_unique<Llama2cTokenizer>(std::move(vocab), std::move(scores), input);
}

Llama2cTokenizer::Llama2cTokenizer(std::vector<std::string> vocab, std::vector<float> scores,
                                   Llama2cInput input)
    : vocab_(std::move(vocab)), scores_(std::move(scores)), input_(input) {
  check(vocab_.size() == scores_.size(), k_op, "{} tokens but {} scores", vocab_.size(),
        scores_.size());
  check(vocab_.size() >= 259, k_op,
        "expected at least 259 tokens (<unk>, BOS, EOS, 256 byte tokens), got {}", vocab_.size());
  for (int b = 0; b < 256; ++b)
    check(parse_byte_token(vocab_[k_byte_offset + b]) == b, k_op,
          "token {} should be the byte token <0x{:02X}>, is '{}'", k_byte_offset + b, b,
          vocab_[k_byte_offset + b]);
  ids_.reserve(vocab_.size() * 2);
  for (size_t i = 0; i < vocab_.size(); ++i) ids_.emplace(vocab_[i], static_cast<int32_t>(i));
  const auto space = ids_.find(" ");
  check(space != ids_.end(), k_op, "vocabulary has no \" \" token (needed as the dummy prefix)");
  space_id_ = space->second;
}

std::vector<int32_t> Llama2cTokenizer::initial_symbols(std::string_view text, bool add_bos) const {
  std::vector<int32_t> out;
  out.reserve(text.size() + 2);
  if (add_bos) out.push_back(k_bos);
  if (text.empty()) return out;
  out.push_back(space_id_);
  std::string ch;
  auto emit = [&] {
    if (const auto it = ids_.find(ch); it != ids_.end()) {
      out.push_back(it->second);
    } else {
      for (char c : ch) out.push_back(static_cast<unsigned char>(c) + k_byte_offset);
    }
    ch.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (input_ == Llama2cInput::characters) {
      // As run.c: a lead byte and up to 3 continuation bytes make one character.
      if (!is_utf8_continuation(text[i])) ch.clear();
      ch.push_back(text[i]);
      if (i + 1 < text.size() && is_utf8_continuation(text[i + 1]) && ch.size() < 4) continue;
    } else {
      ch.assign(1, text[i]);
    }
    emit();
  }
  return out;
}

namespace {
// Pair lookup by string concatenation; priority = -score so the best score merges first.
struct PairLookup {
  const std::vector<std::string>& vocab;
  const std::vector<float>& scores;
  const std::unordered_map<std::string, int32_t>& ids;
  std::string buf;
  Merge operator()(int32_t a, int32_t b) {
    buf.assign(vocab[a]);
    buf += vocab[b];
    const auto it = ids.find(buf);
    if (it == ids.end()) return {};
    return {true, -static_cast<double>(scores[it->second]), it->second};
  }
};
}  // namespace

std::vector<int32_t> Llama2cTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> symbols = initial_symbols(text, add_bos);
  PairLookup lookup{vocab_, scores_, ids_, {}};
  if (!add_bos) {
    merge_symbols(symbols, lookup);
    return symbols;
  }
  // BOS never merges (its string is not part of any vocabulary entry's text), but keep
  // it out of the merge loop so that holds for any vocabulary.
  std::vector<int32_t> rest(symbols.begin() + 1, symbols.end());
  merge_symbols(rest, lookup);
  rest.insert(rest.begin(), k_bos);
  return rest;
}

std::vector<int32_t> Llama2cTokenizer::encode_reference(std::string_view text, bool add_bos) const {
  std::vector<int32_t> symbols = initial_symbols(text, false);
  merge_symbols_reference(symbols, PairLookup{vocab_, scores_, ids_, {}});
  if (add_bos) symbols.insert(symbols.begin(), k_bos);
  return symbols;
}

std::string Llama2cTokenizer::decode_token(int32_t prev, int32_t id) const {
  check(id >= 0 && id < vocab_size(), "llama2c decode", "token id {} outside [0, {})", id,
        vocab_size());
  if (id == k_bos || id == k_eos) return {};
  const std::string& piece = vocab_[id];
  if (const int byte = parse_byte_token(piece); byte >= 0)
    return std::string(1, static_cast<char>(byte));
  if ((prev == k_bos || prev == -1) && !piece.empty() && piece[0] == ' ') return piece.substr(1);
  return piece;
}

const std::string& Llama2cTokenizer::token_string(int32_t id) const {
  check(id >= 0 && id < vocab_size(), "llama2c token_string", "token id {} outside [0, {})", id,
        vocab_size());
  return vocab_[id];
}

std::optional<int32_t> Llama2cTokenizer::token_id(std::string_view token) const {
  const auto it = ids_.find(std::string(token));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

float Llama2cTokenizer::score(int32_t id) const {
  check(id >= 0 && id < vocab_size(), "llama2c score", "token id {} outside [0, {})", id,
        vocab_size());
  return scores_[id];
}

}  // namespace oal::text
