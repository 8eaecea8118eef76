#include "oal/formats/load.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "oal/core/error.h"
#include "oal/formats/gguf_model.h"
#include "oal/formats/hf_config.h"
#include "oal/formats/llama2c.h"
#include "oal/formats/weight_layout.h"
#include "oal/io/gguf.h"
#include "oal/io/json_file.h"
#include "oal/io/safetensors.h"

namespace oal::formats {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view k_op = "load";
constexpr const char* k_index_name = "model.safetensors.index.json";
constexpr const char* k_single_name = "model.safetensors";

nlohmann::json read_json(const fs::path& p) {
  return io::read_json_file(p, k_op);
}

// A shard file name from an index must stay inside the model directory.
fs::path shard_path(const fs::path& dir, const std::string& name, const fs::path& index) {
  fs::path rel(name);
  bool escapes = name.empty() || rel.is_absolute();
  for (const auto& part : rel) escapes = escapes || part == "..";
  check(!escapes, k_op, "{}: shard file name '{}' must be a relative path inside the directory",
        index.string(), name);
  return dir / rel;
}

std::map<std::string, at::Tensor> read_sharded(const fs::path& dir) {
  const fs::path index = dir / k_index_name;
  const nlohmann::json j = read_json(index);
  check(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), k_op,
        "{}: expected an object with a 'weight_map' of tensor name → shard file", index.string());
  std::map<std::string, std::vector<std::string>> by_file;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    check(it.value().is_string(), k_op, "{}: weight_map['{}'] must be a file name", index.string(),
          it.key());
    by_file[it.value().get<std::string>()].push_back(it.key());
  }
  check(!by_file.empty(), k_op, "{}: weight_map is empty", index.string());
  std::map<std::string, at::Tensor> out;
  for (const auto& [file, names] : by_file) {
    const fs::path p = shard_path(dir, file, index);
    check(fs::exists(p), k_op, "{}: shard '{}' listed in the index does not exist", index.string(),
          p.string());
    auto shard = io::read_safetensors(p);
    for (const auto& name : names) {
      auto t = shard.tensors.find(name);
      check(t != shard.tensors.end(), k_op,
            "{}: tensor '{}' is listed in the index for this shard but the file does not hold it",
            p.string(), name);
      out[name] = t->second;
    }
  }
  return out;
}

bool is_rotary_buffer(const std::string& name) {
  const std::string suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

model::ModelWeights load_hf_dir(const fs::path& dir) {
  const std::string src = dir.string();
  check(fs::is_directory(dir), k_op, "{}: expected an HF model directory", src);
  check(fs::exists(dir / "config.json"), k_op,
        "{}: missing config.json (expected an HF model directory)", src);
  model::ModelWeights w;
  w.config = read_hf_config(dir / "config.json");
  if (fs::exists(dir / k_index_name)) {
    w.tensors = read_sharded(dir);
  } else {
    check(fs::exists(dir / k_single_name), k_op,
          "{}: expected {} or {} (PyTorch .bin checkpoints are not supported: convert to "
          "safetensors)",
          src, k_single_name, k_index_name);
    w.tensors = io::read_safetensors(dir / k_single_name).tensors;
  }
  for (auto it = w.tensors.begin(); it != w.tensors.end();) {
    const bool redundant_head = w.config.tie_word_embeddings && it->first == "lm_head.weight";
    it = (redundant_head || is_rotary_buffer(it->first)) ? w.tensors.erase(it) : std::next(it);
  }
  validate_weights(w, src);
  return w;
}

model::ModelWeights load_model(const std::string& path, LoadOptions options) {
  const fs::path p(path);
  check(!path.empty(), k_op,
        "expected a model path (HF directory, .gguf file or llama2.c .bin file)");
  check(fs::exists(p), k_op, "{}: no such file or directory", path);
  if (fs::is_directory(p)) return load_hf_dir(p);
  const auto name = p.filename().string();
  const auto ext = p.extension().string();
  if (name == "config.json" || name == k_index_name || ext == ".safetensors") {
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    return load_hf_dir(dir);
  }
  if (ext == ".gguf" || io::is_gguf_file(p)) return load_gguf_model(p, options.keep_quantized);
  return load_llama2c(p);
}

}  // namespace oal::formats
