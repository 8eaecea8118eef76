// `oal info --model PATH [--json]`: architecture, sizes and dtypes of a checkpoint.
#include <fmt/core.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "command.h"
#include "oal/core/error.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/load.h"
#include "oal/formats/model_summary.h"
#include "oal/io/gguf.h"
#include "oal/io/gguf_summary.h"

namespace {

struct InfoArgs {
  std::string model;
  bool json = false;
  bool tensors = false;
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
      return [a] {
        const oal::model::ModelWeights w = oal::formats::load_model(a->model);
        const std::string tok = tokenizer_or_empty(a->model);
        std::optional<oal::io::GgufFile> gguf;
        if (oal::io::is_gguf_file(a->model)) gguf = oal::io::read_gguf(a->model);
        if (a->json) {
          nlohmann::json j = oal::formats::summary_json(w);
          j["path"] = a->model;
          j["tokenizer"] = tok.empty() ? nlohmann::json(nullptr) : nlohmann::json(tok);
          if (gguf) j["gguf"] = oal::io::gguf_summary_json(gguf->header, a->tensors);
          fmt::print("{}\n", j.dump(2));
          return;
        }
        fmt::print("model             {}\n{}", a->model, oal::formats::describe(w));
        fmt::print("tokenizer         {}\n", tok.empty() ? "(none found beside the model)" : tok);
        if (gguf) fmt::print("{}", oal::io::describe_gguf(gguf->header, a->tensors));
      };
    }};

}  // namespace
