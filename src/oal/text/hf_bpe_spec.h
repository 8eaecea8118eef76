#pragma once
// What a HF tokenizer.json says about a byte-level BPE tokenizer, validated: the parts
// HfBpeTokenizer needs and nothing else. Anything the tokenizer cannot reproduce
// exactly (another model type, normalizer or pre-tokenizer) is rejected here with an
// error naming the field, instead of tokenizing differently from HF.
#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "oal/text/split_pattern.h"

namespace oal::text {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;  // also swallow whitespace before the token
  bool rstrip = false;  // also swallow whitespace after the token
};

struct HfBpeSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;        // model.vocab (byte-level strings)
  std::vector<std::pair<std::string, std::string>> merges;   // model.merges in rank order
  std::vector<AddedToken> added_tokens;
  bool nfc = false;                          // normalizer NFC
  std::optional<SplitPattern> split;         // Split pre-tokenizer, if any
  bool ignore_merges = false;                // model.ignore_merges: whole word in vocab wins
  std::string bos_token, eos_token;          // from tokenizer_config.json; empty if none
  // Whether encode(text, add_bos = true) prepends BOS at all: false for GGUF files whose
  // tokenizer.ggml.add_bos_token is false (SmolLM2: its BOS id is <|im_start|>, which
  // llama.cpp and transformers never prepend).
  bool add_bos = true;
};

// Parses tokenizer.json at `path` (and tokenizer_config.json beside it, if present,
// for the BOS/EOS token names). Throws "[tokenizer.json] ..." errors.
HfBpeSpec parse_tokenizer_json(const std::filesystem::path& path);

// A tokenizer.json document already in memory (`where` names it in errors); BOS/EOS
// names are left empty (they live in tokenizer_config.json).
HfBpeSpec parse_tokenizer_document(const nlohmann::json& root, const std::string& where);

}  // namespace oal::text
