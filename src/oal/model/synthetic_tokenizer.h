#pragma once
// The byte-level BPE tokenizer shipped with synthetic models, as HF files:
// tokenizer.json (model.type "BPE"; ids 0..255 are the 256 bytes in GPT-2's
// byte→unicode spelling, id = byte value; then a fixed list of English merges
// ("Ġ t", "h e", "Ġt he", ...); then the special token <|endoftext|>), with Qwen2's Split
// pre-tokenizer pattern followed by ByteLevel, and a ByteLevel decoder; plus
// tokenizer_config.json naming <|endoftext|> as BOS and EOS. Every byte string is
// encodable (no unknown token), so any text round-trips.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>

#include "oal/io/gguf_writer.h"

namespace oal::model {

// Number of tokens (bytes + merges + special): the smallest valid model vocab.
int64_t synthetic_tokenizer_size();
// Id of <|endoftext|> (the last id).
int64_t synthetic_endoftext_id();

// The tokenizer.json document.
nlohmann::json synthetic_tokenizer_json();

// The same tokenizer as a GGUF file's tokenizer.ggml.* keys (model "gpt2", pre
// "qwen2", BOS = EOS = <|endoftext|>, as the HF directory tokenizes), listing
// `vocab_size` tokens: llama.cpp sizes the embedding by the token list, so ids past the
// tokenizer's are unused normal tokens "<unused{id}>" that no merge forms (encoding
// never produces them). Throws oal::Error("synthetic") when vocab_size <
// synthetic_tokenizer_size().
io::GgufMetadata synthetic_gguf_tokenizer_metadata(int64_t vocab_size);

// Writes tokenizer.json and tokenizer_config.json into `dir` (atomically).
void write_synthetic_tokenizer(const std::filesystem::path& dir, int64_t model_max_length);

}  // namespace oal::model
