#include "oal/model/synthetic_tokenizer.h"

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "oal/core/error.h"
#include "oal/io/atomic_file.h"
#include "oal/text/gguf_tokenizer.h"
#include "oal/text/hf_bpe_spec.h"

namespace oal::model {
namespace {

using nlohmann::json;
constexpr const char* k_endoftext = "<|endoftext|>";

// Qwen2's pre-tokenizer split pattern (the one in Qwen's tokenizer.json).
constexpr const char* k_split_regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Merges in rank order, spelled with GPT-2's byte→unicode map ("Ġ" is the space byte).
// Each right-hand side is built only from earlier tokens.
const std::vector<std::pair<std::string, std::string>>& merges() {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {"Ġ", "t"},  {"h", "e"},  {"Ġ", "a"},   {"i", "n"},  {"Ġt", "he"}, {"e", "r"},
      {"o", "n"},  {"Ġ", "s"},  {"e", "d"},   {"Ġ", "w"},  {"r", "e"},   {"a", "n"},
      {"Ġ", "o"},  {"o", "u"},  {"Ġ", "b"},   {"i", "s"},  {"Ġ", "c"},   {"a", "t"},
      {"e", "n"},  {"Ġ", "f"},  {"Ġa", "n"},  {"Ġan", "d"}, {"i", "t"},  {"Ġ", "h"},
      {"o", "r"},  {"Ġ", "l"},  {"l", "l"},   {"Ġ", "d"},  {"a", "r"},   {"Ġ", "m"},
      {"Ġ", "p"},  {"in", "g"}};
  return m;
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's bytes_to_unicode: printable bytes keep their code point, the others are
// shifted to 256, 257, ... in increasing byte order.
std::array<std::string, 256> byte_strings() {
  std::array<std::string, 256> out;
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    out[b] = utf8(printable ? b : next++);
  }
  return out;
}

json byte_level() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", false},
          {"use_regex", false}};
}

}  // namespace

int64_t synthetic_tokenizer_size() { return 256 + static_cast<int64_t>(merges().size()) + 1; }
int64_t synthetic_endoftext_id() { return synthetic_tokenizer_size() - 1; }

json synthetic_tokenizer_json() {
  json vocab = json::object();
  const auto bytes = byte_strings();
  for (int b = 0; b < 256; ++b) vocab[bytes[b]] = b;
  json merge_list = json::array();
  int64_t id = 256;
  for (const auto& [a, b] : merges()) {
    check(vocab.contains(a) && vocab.contains(b) && !vocab.contains(a + b), "synthetic",
          "internal: merge '{} {}' must join two known tokens into a new one", a, b);
    vocab[a + b] = id++;
    merge_list.push_back({a, b});
  }
  json added = json::array({{{"id", id},
                             {"content", k_endoftext},
                             {"single_word", false},
                             {"lstrip", false},
                             {"rstrip", false},
                             {"normalized", false},
                             {"special", true}}});
  json split = {{"type", "Split"},
                {"pattern", {{"Regex", k_split_regex}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split, byte_level()}}}},
          {"post_processor", byte_level()},
          {"decoder", byte_level()},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merge_list}}}};
}

void write_synthetic_tokenizer(const std::filesystem::path& dir, int64_t model_max_length) {
  io::write_file_atomic(dir / "tokenizer.json", synthetic_tokenizer_json().dump(2) + "\n");
  const json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                       {"bos_token", k_endoftext},
                       {"eos_token", k_endoftext},
                       {"add_bos_token", false},
                       {"add_prefix_space", false},
                       {"model_max_length", model_max_length}};
  io::write_file_atomic(dir / "tokenizer_config.json", config.dump(2) + "\n");
}

io::GgufMetadata synthetic_gguf_tokenizer_metadata(int64_t vocab_size) {
  const int64_t size = synthetic_tokenizer_size();
  check(vocab_size >= size, "synthetic",
        "vocab_size {} is smaller than the synthetic tokenizer ({} tokens)", vocab_size, size);
  text::HfBpeSpec spec = text::parse_tokenizer_document(synthetic_tokenizer_json(), "synthetic tokenizer");
  // As the HF directory reads (tokenizer_config.json names it; BOS is prepended).
  spec.bos_token = spec.eos_token = k_endoftext;
  for (int64_t id = size; id < vocab_size; ++id)
    spec.vocab.emplace_back("<unused" + std::to_string(id) + ">", static_cast<int32_t>(id));
  return text::gguf_tokenizer_metadata(spec);
}

}  // namespace oal::model
