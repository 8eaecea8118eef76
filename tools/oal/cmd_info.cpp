// `oal info --model PATH [--json]`: architecture, sizes and dtypes of a checkpoint, and
// the fast path each op of the model built from it takes (with --weights / --kv-cache /
// --quant-dot as generate, ppl and serve take them), or why not.
#include <fmt/core.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "command.h"
#include "oal/core/error.h"
#include "oal/formats/converted.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/gguf_model.h"
#include "oal/formats/load.h"
#include "oal/formats/model_summary.h"
#include "oal/io/gguf.h"
#include "oal/io/gguf_summary.h"
#include "oal/model/fast_paths.h"
#include "weights_option.h"

namespace {

struct InfoArgs {
  std::string model;
  bool json = false;
  bool tensors = false;
  oal::model::TransformerOptions options;
};

// The tokenizer that generate/ppl would use, or "" when none is beside the model.
std::string tokenizer_or_empty(const std::string& model) {
  try {
    return oal::formats::find_tokenizer(model).string();
  } catch (const oal::Error&) {
    return "";
  }
}

oal::cli::Registrar reg{
    "info", "Describe a checkpoint (HF directory, .gguf file or llama2.c .bin)", [](CLI::App& app) {
      auto a = std::make_shared<InfoArgs>();
      app.add_option("--model", a->model, "HF model directory, .gguf file or llama2.c checkpoint")
          ->required();
      app.add_flag("--json", a->json, "Machine-readable output");
      app.add_flag("--tensors", a->tensors,
                   "GGUF: also list every tensor (name, type, dims, bytes)");
      oal::cli::add_weights_option(app, a->options);
      return [a] {
        // Read once: quantized tensors kept as stored, for the summary and the model.
        std::optional<oal::io::GgufFile> gguf;
        if (oal::io::is_gguf_file(a->model)) gguf = oal::io::read_gguf(a->model);
        oal::model::ModelWeights w =
            gguf ? oal::formats::gguf_model_weights(*gguf, /*keep_quantized=*/true)
                 : oal::formats::load_model(a->model, {.keep_quantized = true});
        const std::string tok = tokenizer_or_empty(a->model);
        nlohmann::json summary = oal::formats::summary_json(w);
        const std::string text = oal::formats::describe(w);
        const auto model = oal::formats::build_transformer(std::move(w), a->model, a->options);
        const std::vector<oal::model::FastPath> paths = oal::model::fast_paths(*model);
        if (a->json) {
          summary["path"] = a->model;
          summary["tokenizer"] = tok.empty() ? nlohmann::json(nullptr) : nlohmann::json(tok);
          summary["fast_paths"] = oal::formats::fast_paths_json(paths);
          if (gguf) summary["gguf"] = oal::io::gguf_summary_json(gguf->header, a->tensors);
          fmt::print("{}\n", summary.dump(2));
          return;
        }
        fmt::print("model             {}\n{}", a->model, text);
        fmt::print("tokenizer         {}\n", tok.empty() ? "(none found beside the model)" : tok);
        fmt::print("{}", oal::formats::describe_fast_paths(paths));
        if (gguf) fmt::print("{}", oal::io::describe_gguf(gguf->header, a->tensors));
      };
    }};

}  // namespace
