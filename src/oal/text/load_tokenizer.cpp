#include <fstream>

#include "oal/core/error.h"
#include "oal/io/gguf.h"
#include "oal/text/gguf_tokenizer.h"
#include "oal/text/hf_bpe_tokenizer.h"
#include "oal/text/llama2c_tokenizer.h"
#include "oal/text/tokenizer.h"

namespace oal::text {

namespace {
constexpr std::string_view k_op = "load tokenizer";

// A tokenizer.json starts with '{' and then '"' or '}' (after blanks). A llama2.c file
// starts with int32 max_token_length, whose first byte can be '{' (123) but is then
// followed by zero bytes.
bool looks_like_json(const std::filesystem::path& path) {
  if (path.extension() == ".json") return true;
  std::ifstream in(path, std::ios::binary);
  auto next_non_blank = [&in] {
    char c = 0;
    while (in.get(c))
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c;
    return '\0';
  };
  if (next_non_blank() != '{') return false;
  const char second = next_non_blank();
  return second == '"' || second == '}';
}
}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& path) {
  check(std::filesystem::exists(path), k_op,
        "'{}' does not exist (expected tokenizer.json, a model directory "
        "holding one, a .gguf model file, or a llama2.c tokenizer .bin)",
        path.string());
  if (std::filesystem::is_directory(path)) {
    const auto json_path = path / "tokenizer.json";
    check(std::filesystem::is_regular_file(json_path), k_op, "directory '{}' has no tokenizer.json",
          path.string());
    return HfBpeTokenizer::load(json_path);
  }
  if (io::is_gguf_file(path)) return load_gguf_tokenizer(path);
  if (looks_like_json(path)) return HfBpeTokenizer::load(path);
  return Llama2cTokenizer::load(path);
}

}  // namespace oal::text
