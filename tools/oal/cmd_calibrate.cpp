// `oal calibrate`: fit every method's kernel parameters against softmax on frozen
// q, k, v of a model (paper Eq. 20, App. B) and write a run directory.
#include <fmt/core.h>

#include "calib_options.h"
#include "command.h"
#include "oal/attention/registry.h"
#include "oal/attention/kernel_json.h"
#include "oal/calib/pipeline.h"
#include "oal/calib/run_dir.h"
#include "oal/model/fingerprint.h"
#include "oal/model/find_tokenizer.h"
#include "oal/model/load.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "progress_bar.h"

namespace {

struct CalibrateArgs {
  std::string model, text, groups, tokenizer, out, layers;
  std::string methods = oal::attn::method_list(",");
  int64_t ctx = 256;
  oal::cli::SplitArgs split;
  oal::calib::CalibrationOptions options;
  bool quiet = false, json = false;
};

void run(const CalibrateArgs& a) {
  auto tok = oal::text::load_tokenizer(oal::model::find_tokenizer(a.model, a.tokenizer));
  const std::vector<int32_t> stream = tok->encode(oal::text::read_text_file(a.text), false);
  std::string fingerprint;
  const oal::model::Transformer model = [&] {
    const oal::model::ModelWeights w = oal::model::load_model(a.model);
    fingerprint = oal::model::model_fingerprint(w);
    return oal::model::Transformer(w);
  }();
  oal::calib::ModelCalibrationOptions o;
  o.ctx = a.ctx;
  o.layers = oal::cli::parse_layers(a.layers);
  o.split = a.split.parse();
  o.calibration = a.options;
  o.calibration.methods = oal::cli::split_names(a.methods);
  std::optional<oal::attn::ModelKernels> groups;
  if (!a.groups.empty()) groups = oal::attn::read_kernels(a.groups);
  oal::calib::CalibrationResult r;
  {
    oal::cli::ProgressBar cap("capture", !a.quiet), fits("calibrate", !a.quiet);
    o.capture_progress = cap.fn();
    o.calibration.progress = fits.fn();
    r = oal::calib::calibrate_model(model, stream, groups ? &*groups : nullptr, o);
  }
  oal::calib::write_run(a.out, r, o.calibration, {a.model, a.text, a.ctx, o.split, fingerprint});
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"out", a.out}, {"fits", oal::calib::reports_json(r.reports)}}.dump(2));
    return;
  }
  fmt::print("{:<14} {:>6} {:>5} {:<16} {:>12} {:>12} {:>6}\n", "method", "layer", "head",
             "init", "val MSE 0", "val MSE best", "at");
  for (const auto& f : r.reports)
    if (f.selected)
      fmt::print("{:<14} {:>6} {:>5} {:<16} {:>12.5g} {:>12.5g} {:>6}\n", f.method, f.layer,
                 f.head, f.init, f.initial_val, f.best_val, f.best_update);
  fmt::print("wrote {}\n", a.out);
}

oal::cli::Registrar reg{
    "calibrate", "Fit kernel parameters of OAL and the baselines against softmax (Eq. 20)",
    [](CLI::App& app) {
      auto a = std::make_shared<CalibrateArgs>();
      app.add_option("--model", a->model, "HF model directory or llama2.c checkpoint")->required();
      app.add_option("--text", a->text, "Text file: one token stream cut into ctx-token blocks")
          ->required();
      app.add_option("--groups", a->groups, "Kernel JSON from `oal group` (needed for oal)");
      app.add_option("--methods", a->methods, "Comma-separated methods (of " + oal::attn::method_list() + ")")->capture_default_str();
      app.add_option("--layers", a->layers, "Layers, e.g. 0,2,4-7 (default: all)");
      app.add_option("--ctx", a->ctx, "Block length in tokens")->capture_default_str();
      app.add_option("--out", a->out, "Run directory to write")->required();
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      oal::cli::add_split_options(app, a->split);
      oal::cli::add_fit_options(app, a->options);
      app.add_flag("--quiet", a->quiet, "No progress bars");
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
