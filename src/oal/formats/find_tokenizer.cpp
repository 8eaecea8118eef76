#include "oal/formats/find_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "oal/core/error.h"

namespace oal::formats {

std::filesystem::path find_tokenizer(const std::filesystem::path& model_path,
                                     const std::filesystem::path& explicit_path) {
  namespace fs = std::filesystem;
  if (!explicit_path.empty()) {
    check(fs::exists(explicit_path), "tokenizer", "{}: no such file or directory",
          explicit_path.string());
    return explicit_path;
  }
  // Said first: a missing model would otherwise read as a missing tokenizer beside it.
  check(fs::exists(model_path), "model",
        "{}: no such file or directory (--model takes an HF model directory, a .gguf file, a "
        "llama2.c checkpoint or a directory written by oal convert)",
        model_path.string());
  // A GGUF file carries its own tokenizer (tokenizer.ggml.* metadata).
  if (fs::is_regular_file(model_path) && model_path.extension() == ".gguf") return model_path;
  const fs::path dir = fs::is_directory(model_path) ? model_path : model_path.parent_path();
  const fs::path base = dir.empty() ? fs::path(".") : dir;
  // A llama2.c checkpoint (a .bin file) prefers the llama2.c tokenizer files.
  const bool llama2c = fs::is_regular_file(model_path) && model_path.extension() == ".bin";
  std::vector<fs::path> candidates = {base / "tokenizer.json", base / "tok512.bin",
                                      base / "tokenizer.bin", base / "tokenizer.gguf"};
  if (llama2c) std::rotate(candidates.begin(), candidates.begin() + 1, candidates.end());
  for (const auto& c : candidates)
    if (fs::is_regular_file(c)) return c;
  std::vector<std::string> names;
  for (const auto& c : candidates) names.push_back(c.string());
  fail("tokenizer", "no tokenizer found for model {}; looked for {}; pass --tokenizer PATH",
       model_path.string(), fmt::join(names, ", "));
}

std::unique_ptr<text::Tokenizer> open_tokenizer(const std::filesystem::path& model_path,
                                                const std::filesystem::path& explicit_path) {
  return text::load_tokenizer(find_tokenizer(model_path, explicit_path));
}

}  // namespace oal::formats
