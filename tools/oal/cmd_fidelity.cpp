// `oal fidelity`: frozen-attention fidelity of a calibration run (paper Table 2).
#include <fmt/core.h>

#include "calib_options.h"
#include "command.h"
#include "oal/attention/method_store.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/load.h"
#include "oal/io/atomic_file.h"
#include "oal/linearize/fidelity_run.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "progress_bar.h"

namespace {

struct FidelityArgs {
  std::string model, text, calib, tokenizer, layers, out;
  int64_t ctx = 256;
  oal::cli::SplitArgs split;
  bool json = false, quiet = false;
};

void run(const FidelityArgs& a) {
  auto tok = oal::formats::open_tokenizer(a.model, a.tokenizer);
  const std::vector<int32_t> stream = tok->encode(oal::text::read_text_file(a.text), false);
  const oal::model::Transformer model(oal::formats::load_model(a.model));
  const oal::attn::MethodStore run = oal::attn::read_method_store(a.calib);
  oal::linearize::FidelityResult r;
  {
    oal::cli::ProgressBar cap("capture", !a.quiet), bar("fidelity", !a.quiet);
    r = oal::linearize::evaluate_run(model, stream, a.ctx, a.split.parse(), run.layers,
                                oal::cli::parse_layers(a.layers), {}, cap.fn(), bar.fn());
  }
  nlohmann::json j = oal::linearize::fidelity_json(r);
  j["model"] = a.model;
  j["text"] = a.text;
  j["calib"] = a.calib;
  j["ctx"] = a.ctx;
  const std::string out =
      a.out.empty() ? (std::filesystem::path(a.calib) / "fidelity.json").string() : a.out;
  oal::io::write_file_atomic(out, j.dump(2) + "\n");
  if (a.json) {
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("Frozen-attention fidelity: {} sequences x {} tokens\n{}", r.sequences,
             r.tokens_per_sequence, oal::linearize::fidelity_table(r));
  fmt::print("wrote {}\n", out);
}

oal::cli::Registrar reg{
    "fidelity", "Frozen-attention MSE/RelMSE of every calibrated method vs softmax (Table 2)",
    [](CLI::App& app) {
      auto a = std::make_shared<FidelityArgs>();
      app.add_option("--model", a->model, "HF model directory, .gguf file or llama2.c checkpoint")
          ->required();
      app.add_option("--text", a->text, "Text file (same stream as calibration)")->required();
      app.add_option("--calib", a->calib, "Run directory written by `oal calibrate`")->required();
      app.add_option("--layers", a->layers, "Layers to evaluate (default: all calibrated)");
      app.add_option("--ctx", a->ctx, "Block length in tokens")->capture_default_str();
      app.add_option("--out", a->out, "JSON output (default: CALIB/fidelity.json)");
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      oal::cli::add_split_options(app, a->split);
      app.add_flag("--json", a->json, "Print the JSON instead of the table");
      app.add_flag("--quiet", a->quiet, "No progress bars");
      return [a] { run(*a); };
    }};

}  // namespace
