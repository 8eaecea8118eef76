#pragma once
// SentencePiece vocabularies as GGUF files store them (tokenizer.ggml.model "llama":
// Llama-1/2, Mistral, TinyLlama, ...), encoded as llama.cpp encodes them (its "SPM"
// tokenizer), which follows SentencePiece's BPE with byte fallback:
//   1. the text is cut at added tokens (control and user-defined tokens matched as text,
//      longest first); each added token becomes its id;
//   2. each remaining piece gets a leading space when add_space_prefix and it starts the
//      text or follows an added token; spaces become "▁" (U+2581);
//   3. the piece is split into UTF-8 characters, and repeatedly the adjacent pair whose
//      concatenation is a vocabulary entry with the highest score merges (leftmost pair
//      on equal scores);
//   4. a final symbol that is not an entry becomes its bytes' "<0xAB>" tokens.
// Decoding turns "▁" back into spaces, byte tokens into their bytes, control tokens into
// nothing, and drops the space the encoder prefixed (at the start and after a control
// token).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "oal/text/tokenizer.h"

namespace oal::text {

// llama.cpp's token types (llama_token_type), as tokenizer.ggml.token_type stores them.
enum class SpmTokenType : int32_t {
  normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6
};

// A SentencePiece vocabulary: tokens[i], scores[i], types[i] describe id i.
struct SpmVocab {
  std::vector<std::string> tokens;   // "▁the", "<0x0A>", "<s>", ...
  std::vector<float> scores;         // higher merges first
  std::vector<SpmTokenType> types;
  int32_t bos = -1, eos = -1, unk = -1;  // -1: none
  bool add_bos = true;               // llama.cpp's default for SentencePiece files
  bool add_space_prefix = true;      // tokenizer.ggml.add_space_prefix (default true)
};

class SpmTokenizer final : public Tokenizer {
 public:
  // Throws oal::Error("[spm tokenizer] ...") for an empty vocabulary, lengths that
  // differ, repeated tokens, special ids outside the vocabulary, or a byte token whose
  // text is not "<0xAB>".
  explicit SpmTokenizer(SpmVocab vocab);

  std::string kind() const override { return "spm"; }
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  std::string decode_token(int32_t prev, int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.tokens.size()); }
  int32_t bos_id() const override { return vocab_.bos; }
  int32_t eos_id() const override { return vocab_.eos; }
  const std::string& token_string(int32_t id) const override;
  std::optional<int32_t> token_id(std::string_view token) const override;
  const SpmVocab& vocab() const { return vocab_; }

 private:
  // Steps 2-4 for one piece of text between added tokens.
  void encode_piece(std::string_view piece, bool prefix_space, std::vector<int32_t>& out) const;
  // The token of one final symbol, or its bytes' tokens.
  void emit_symbol(std::string_view symbol, std::vector<int32_t>& out) const;
  int32_t byte_token(uint8_t byte) const;

  SpmVocab vocab_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<int32_t> byte_ids_;            // 256 entries, -1 where the vocabulary has none
  std::vector<int32_t> added_;               // control and user-defined ids, longest text first
  std::vector<bool> added_first_;            // 256: some added token starts with this byte
};

}  // namespace oal::text
