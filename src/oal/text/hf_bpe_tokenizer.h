#pragma once
// HF tokenizer.json byte-level BPE (Qwen2/Qwen3, Llama-3 and other GPT-2-style
// vocabularies). Encoding, as HF tokenizers does it:
//   1. added tokens (special or not) are cut out of the raw text, leftmost first and
//      longest first at a position, and become their own ids;
//   2. each remaining segment is normalised (NFC when the file says so),
//   3. split by the Split pre-tokenizer (Qwen2 / Llama-3 pattern),
//   4. each piece's bytes are mapped to ByteLevel characters and BPE-merged by merge
//      rank (lowest first, leftmost on ties); with ignore_merges a piece that is itself
//      a vocabulary entry is taken whole.
// Decoding maps every token's characters back to bytes (ByteLevel decoder).
#include <array>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "oal/text/hf_bpe_spec.h"
#include "oal/text/tokenizer.h"

namespace oal::text {

class HfBpeTokenizer final : public Tokenizer {
 public:
  // `path`: a tokenizer.json file.
  static std::unique_ptr<HfBpeTokenizer> load(const std::filesystem::path& path);
  explicit HfBpeTokenizer(const HfBpeSpec& spec);

  std::string kind() const override { return "hf-bpe"; }
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  std::string decode_token(int32_t prev, int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(token_strings_.size()); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  const std::string& token_string(int32_t id) const override;
  std::optional<int32_t> token_id(std::string_view token) const override;
  // Whether `id` is an added token marked special (e.g. <|endoftext|>).
  bool is_special(int32_t id) const;

  // BPE of one pre-tokenized piece (raw bytes) without the word cache, merging with
  // the plain O(n^2) rescan (for tests against the fast path).
  std::vector<int32_t> bpe_piece_reference(std::string_view piece) const;

 private:
  struct MergeRule {
    int32_t rank, id;
  };
  void add_tokens(const HfBpeSpec& spec);
  void add_merges(const HfBpeSpec& spec);
  void encode_segment(std::string_view segment, std::vector<int32_t>& out) const;
  void bpe_piece(std::string_view piece, std::vector<int32_t>& out) const;
  std::vector<int32_t> bpe_piece_uncached(std::string_view piece) const;
  // The byte tokens of `piece` (bytes without a token dropped), before merging.
  std::vector<int32_t> byte_symbols(std::string_view piece) const;
  // Position and token index of the first added token in text[from, ...), leftmost
  // then longest; npos when none.
  std::pair<size_t, int> find_added(std::string_view text, size_t from) const;

  std::unordered_map<std::string, int32_t> vocab_;   // byte-level string -> id (model.vocab)
  std::unordered_map<uint64_t, MergeRule> merges_;   // (left id << 32 | right id) -> rule
  std::vector<std::string> token_strings_;           // id -> vocab string / added content
  std::vector<std::string> token_bytes_;             // id -> decoded bytes
  std::vector<bool> has_token_, special_;
  std::array<int32_t, 256> byte_ids_{};              // id of each single byte's token, -1: none
  std::vector<AddedToken> added_;
  std::array<std::vector<int>, 256> added_by_first_byte_;  // indices into added_, longest first
  bool nfc_ = false, ignore_merges_ = false;
  std::optional<SplitPattern> split_;
  int32_t bos_id_ = -1, eos_id_ = -1;
  bool add_bos_ = true;  // HfBpeSpec::add_bos

  // Word cache: piece bytes -> ids. Pieces repeat a lot in natural text.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace oal::text
