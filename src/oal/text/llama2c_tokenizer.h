#pragma once
// The llama2.c tokenizer (Karpathy's run.c): a SentencePiece-style vocabulary with one
// score per token, encoded by greedy highest-score pair merging.
//
// File: int32 max_token_length, then per token: float32 score, int32 byte length,
// bytes (no terminator), until the end of the file. Ids 0 <unk>, 1 BOS, 2 EOS,
// 3..258 the byte tokens <0x00>..<0xFF>.
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "oal/text/tokenizer.h"

namespace oal::text {

// How encoding looks up the text before merging.
enum class Llama2cInput {
  // Each UTF-8 byte as its single-byte token if in the vocabulary, else byte + 3. This
  // is the shared data README's rule and what its references (234,251 tokens for
  // tinystories-dev.txt, PPL 5.0078) were computed with. The default.
  bytes,
  // Karpathy's run.c: each whole UTF-8 character (lead byte + up to 3 continuation
  // bytes) as its token if in the vocabulary, else its bytes + 3. Differs from `bytes`
  // only for multi-byte characters that are vocabulary entries (tok512 has e.g. "é").
  characters,
};

class Llama2cTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t k_bos = 1;
  static constexpr int32_t k_eos = 2;
  static constexpr int32_t k_byte_offset = 3;  // id of <0x00>

  // Reads a llama2.c tokenizer file; throws "[llama2c tokenizer] ..." on a missing,
  // truncated or malformed file.
  static std::unique_ptr<Llama2cTokenizer> load(const std::filesystem::path& path,
                                                Llama2cInput input = Llama2cInput::bytes);

  // `vocab` and `scores` have one entry per id; the vocabulary must hold the 259
  // control and byte tokens and a " " token (the dummy prefix).
  Llama2cTokenizer(std::vector<std::string> vocab, std::vector<float> scores,
                   Llama2cInput input = Llama2cInput::bytes);

  std::string kind() const override { return "llama2c"; }
  // run.c encode: [BOS] [" "] (dummy prefix, when text is non-empty), the text's
  // bytes or characters as tokens (see Llama2cInput), then repeatedly the adjacent pair
  // whose concatenation is a token with the highest score (leftmost on ties) merges.
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  // run.c decode: BOS/EOS print nothing; after BOS (or at the start, prev == -1) a
  // leading space is dropped (the dummy prefix); <0xNN> prints the raw byte.
  std::string decode_token(int32_t prev, int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.size()); }
  int32_t bos_id() const override { return k_bos; }
  int32_t eos_id() const override { return k_eos; }
  const std::string& token_string(int32_t id) const override;
  std::optional<int32_t> token_id(std::string_view token) const override;
  float score(int32_t id) const;

  // Same result as encode, merging with the plain O(n^2) rescan of run.c (for tests).
  std::vector<int32_t> encode_reference(std::string_view text, bool add_bos) const;

 private:
  std::vector<int32_t> initial_symbols(std::string_view text, bool add_bos) const;
  std::vector<std::string> vocab_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int32_t> ids_;  // first id of each string
  int32_t space_id_ = -1;
  Llama2cInput input_ = Llama2cInput::bytes;
};

}  // namespace oal::text
