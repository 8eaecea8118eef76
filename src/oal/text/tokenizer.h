#pragma once
// The one tokenizer interface the model, evaluation and CLI use, and the loader that
// picks the implementation from the file:
//   * an HF tokenizer.json (byte-level BPE: Qwen2, Llama-3)  -> HfBpeTokenizer
//   * a directory holding tokenizer.json (an HF model dir)     -> HfBpeTokenizer
//   * a .gguf model file (tokenizer.ggml.* metadata)           -> HfBpeTokenizer ("gpt2")
//                                                                 or SpmTokenizer ("llama")
//   * a llama2.c tokenizer .bin (e.g. tok512.bin)             -> Llama2cTokenizer
// Token ids are int32; decoding returns raw bytes (UTF-8 when the ids cover whole
// characters; a partial character's bytes are returned as they are).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oal::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // "llama2c", "hf-bpe" or "spm".
  virtual std::string kind() const = 0;

  // Token ids of `text`, with the BOS id first when add_bos and the tokenizer has one
  // and adds it (without a BOS token, or for a GGUF file whose add_bos_token is false,
  // add_bos adds nothing). Empty text -> [] or [BOS].
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;

  // Text of `ids` (ids in [0, vocab_size); an unknown id throws).
  virtual std::string decode(const std::vector<int32_t>& ids) const;

  // Bytes to print for `id` when it follows `prev` (-1 at the start of a sequence),
  // for streaming generation: concatenating decode_token over a sequence equals decode.
  virtual std::string decode_token(int32_t prev, int32_t id) const = 0;

  // One past the largest token id.
  virtual int32_t vocab_size() const = 0;
  // -1 when the tokenizer has no such token.
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;

  // The vocabulary's string for `id` as stored in the file (llama2.c: e.g. "<0x0A>",
  // " the"; HF byte-level: e.g. "Ġthe", or an added token's content).
  virtual const std::string& token_string(int32_t id) const = 0;
  // The id whose vocabulary string is exactly `token`, if any.
  virtual std::optional<int32_t> token_id(std::string_view token) const = 0;
};

// Loads a tokenizer.json, a directory with tokenizer.json, or a llama2.c tokenizer
// file (see above). Throws oal::Error("[load tokenizer] ...") when nothing usable is there.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& path);

}  // namespace oal::text
