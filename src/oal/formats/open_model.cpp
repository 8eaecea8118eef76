#include "oal/formats/open_model.h"

#include <map>

#include "oal/formats/converted.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/gguf_model.h"
#include "oal/formats/stop_tokens.h"
#include "oal/io/gguf.h"
#include "oal/io/json_file.h"
#include "oal/text/gguf_tokenizer.h"
#include "oal/text/tokenizer.h"

namespace oal::formats {
namespace fs = std::filesystem;
namespace {

constexpr const char* k_op = "model";

// The GGUF files open_model reads, each parsed on first use only.
class GgufFiles {
 public:
  const io::GgufFile& at(const fs::path& path) {
    auto it = files_.find(path);
    if (it == files_.end()) it = files_.emplace(path, io::read_gguf(path)).first;
    return it->second;
  }

 private:
  std::map<fs::path, io::GgufFile> files_;
};

bool is_gguf(const fs::path& p) { return fs::is_regular_file(p) && io::is_gguf_file(p); }

// The chat template stored with the model at `path` (see open_model.h).
std::string chat_template(const fs::path& path, GgufFiles& ggufs) {
  if (is_gguf(path)) return text::gguf_chat_template(ggufs.at(path).header).value_or("");
  const fs::path dir = fs::is_directory(path) ? path : path.parent_path();
  if (is_gguf(dir / "tokenizer.gguf"))
    return text::gguf_chat_template(ggufs.at(dir / "tokenizer.gguf").header).value_or("");
  const fs::path config = dir / "tokenizer_config.json";
  if (!fs::is_regular_file(config)) return {};
  const nlohmann::json j = io::read_json_file(config, k_op);
  const auto it = j.find("chat_template");
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

OpenedModel open_model(const fs::path& path, const OpenOptions& options) {
  GgufFiles ggufs;
  OpenedModel m;
  const fs::path tokenizer = find_tokenizer(path, options.tokenizer);
  m.tokenizer = is_gguf(tokenizer) ? text::gguf_tokenizer(ggufs.at(tokenizer).header)
                                   : text::load_tokenizer(tokenizer);
  // Quantized GGUF tensors stay quantized for the CPU kernels (as load_transformer).
  const bool keep_quantized = options.device.is_cpu();
  model::ModelWeights weights = is_gguf(path)
                                    ? gguf_model_weights(ggufs.at(path), keep_quantized)
                                    : load_model(path.string(), {.keep_quantized = keep_quantized});
  m.model = build_transformer(std::move(weights), path.string(), options.transformer,
                              options.device);
  m.chat_template = chat_template(path, ggufs);
  m.stop_tokens = default_stop_tokens(m.model->config(), *m.tokenizer);
  return m;
}

}  // namespace oal::formats
