#pragma once
// The tokenizer stored in a GGUF file's metadata (tokenizer.ggml.*), as llama.cpp
// reads it:
//   tokenizer.ggml.model       "gpt2": byte-level BPE (HfBpeTokenizer), or "llama":
//                              SentencePiece (SpmTokenizer, text/spm_tokenizer.h; also
//                              tokenizer.ggml.scores, unknown_token_id, add_space_prefix)
//   tokenizer.ggml.pre         the pre-tokenizer name → SplitPattern ("smollm" and its
//                              StarCoder relatives, "gpt2"/"default", "qwen2", "llama-bpe")
//   tokenizer.ggml.tokens      array[string], id = index (byte-level strings)
//   tokenizer.ggml.merges      array[string] "left right", in rank order
//   tokenizer.ggml.token_type  array[int32]: 1 normal, 3 control, 4 user-defined, ...;
//                              control and user-defined tokens are added tokens (cut out
//                              of the text before BPE; control ones are special)
//   tokenizer.ggml.{bos,eos}_token_id, add_bos_token, tokenizer.chat_template
// A gpt2 vocabulary becomes an HfBpeSpec, so encoding is exactly HfBpeTokenizer's.
#include <memory>
#include <optional>
#include <string>

#include "oal/io/gguf.h"
#include "oal/io/gguf_writer.h"
#include "oal/text/hf_bpe_spec.h"
#include "oal/text/spm_tokenizer.h"
#include "oal/text/tokenizer.h"

namespace oal::text {

struct GgufTokenizerInfo {
  HfBpeSpec spec;
  std::string pre;                  // tokenizer.ggml.pre as stored ("" when absent)
  bool add_bos = false;  // tokenizer.ggml.add_bos_token (absent: false, as llama.cpp does for BPE);
                         // also spec.add_bos
  std::optional<std::string> chat_template;  // tokenizer.chat_template, for later use
};

// tokenizer.ggml.model, "gpt2" or "llama"; throws "[gguf tokenizer] ..." for others.
std::string gguf_tokenizer_model(const io::GgufHeader& header);

// Reads and validates a "gpt2" vocabulary. Throws "[gguf tokenizer] <key>: ...".
GgufTokenizerInfo read_gguf_tokenizer(const io::GgufHeader& header);

// Reads and validates a "llama" (SentencePiece) vocabulary: tokens, scores and token
// types one per token; special ids default to llama.cpp's (unk 0, BOS 1, EOS 2), BOS is
// added unless add_bos_token is false. Throws "[gguf tokenizer] <key>: ...".
SpmVocab read_gguf_spm_vocab(const io::GgufHeader& header);

// tokenizer.chat_template, for either model.
std::optional<std::string> gguf_chat_template(const io::GgufHeader& header);

// The tokenizer the header describes, of either model.
std::unique_ptr<Tokenizer> gguf_tokenizer(const io::GgufHeader& header);

// The tokenizer of a GGUF file (reads only the header).
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& path);

// The pre-tokenizer for a tokenizer.ggml.pre name; throws naming the supported names.
SplitPattern gguf_pre_tokenizer(const std::string& pre);

// The tokenizer.* keys of a GGUF file alone, as a GGUF file without tensors
// ("tokenizer.gguf"): what a converted model directory keeps of a GGUF source model, so
// that it tokenizes exactly as the source without a copy of its weights.
void write_gguf_tokenizer(const std::filesystem::path& source_gguf,
                          const std::filesystem::path& out);

// The other direction, for writing GGUF files: `spec` as tokenizer.ggml.* keys (ids
// must be dense 0..N-1; added special tokens become control tokens, other added tokens
// user-defined; the split pattern its llama.cpp pre name, "gpt2" when there is none).
// Read back, it tokenizes as `spec` does except for NFC, which GGUF cannot say.
io::GgufMetadata gguf_tokenizer_metadata(const HfBpeSpec& spec);

}  // namespace oal::text
