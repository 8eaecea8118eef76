#pragma once
// Where the tokenizer of a checkpoint lives, the way users of llama.cpp / transformers
// expect: an HF model directory (or a file inside it) uses its tokenizer.json; a
// llama2.c checkpoint uses tok512.bin or tokenizer.bin in the same directory; a .gguf
// file is its own tokenizer; a directory converted from a GGUF model holds
// tokenizer.gguf (its tokenizer metadata).
#include <filesystem>
#include <memory>
#include <string>

#include "oal/text/tokenizer.h"

namespace oal::formats {

// `explicit_path` non-empty → returned as is (it must exist). Otherwise looks beside
// `model_path` as above. Throws oal::Error("[model] ...") when model_path does not
// exist, and oal::Error("[tokenizer] ...") naming the places searched and suggesting
// --tokenizer when no tokenizer exists.
std::filesystem::path find_tokenizer(const std::filesystem::path& model_path,
                                     const std::filesystem::path& explicit_path = {});

// The tokenizer find_tokenizer names, loaded (text::load_tokenizer): what every command
// that takes --model and --tokenizer opens. Throws as both do.
std::unique_ptr<text::Tokenizer> open_tokenizer(const std::filesystem::path& model_path,
                                                const std::filesystem::path& explicit_path = {});

}  // namespace oal::formats
