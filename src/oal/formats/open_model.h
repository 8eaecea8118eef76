#pragma once
// Opening a model for inference, the one way every command and the server do it (after
// llama.cpp's model loader): the transformer (a converted directory's methods included),
// its tokenizer, the chat template stored with it and the tokens that end a generation,
// with every file read once. A GGUF model is parsed once for all four; a converted
// directory's tokenizer.gguf once for the tokenizer and the template.
//
// Where each part comes from:
//   weights        load_transformer (converted.h): any path load_model takes
//   tokenizer      options.tokenizer, else found beside the model (find_tokenizer.h)
//   chat template  the .gguf model itself, the directory's tokenizer.gguf, else its
//                  tokenizer_config.json "chat_template" ("" when none of them has one)
//   stop tokens    default_stop_tokens (stop_tokens.h) of the config and the tokenizer
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "oal/model/transformer.h"
#include "oal/text/tokenizer.h"

namespace oal::formats {

struct OpenOptions {
  std::filesystem::path tokenizer;        // --tokenizer; empty: found beside the model
  model::TransformerOptions transformer;  // weight format, threads (Transformer's options)
  at::Device device = at::kCPU;
};

struct OpenedModel {
  std::unique_ptr<model::Transformer> model;
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::string chat_template;         // the stored template text; "" when the model has none
  std::vector<int32_t> stop_tokens;  // sorted, without repeats
};

// Throws what its parts throw: "[model] ..." for a missing path, "[tokenizer] ..." when
// no tokenizer is found, "[gguf] ..." / "[gguf model] ..." for a bad file, "[convert] ..."
// for a converted directory that does not match its model.
OpenedModel open_model(const std::filesystem::path& path, const OpenOptions& options = {});

}  // namespace oal::formats
