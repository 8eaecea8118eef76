// `oal convert`: write a converted model directory (chosen layers running a calibrated
// attention method, no training) that `oal ppl` / `oal generate` / `oal eval` load.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/attention/registry.h"
#include "oal/convert/convert_run.h"

namespace {

struct ConvertArgs {
  oal::convert::ConvertOptions o;
  std::string calib, tokenizer, out, init = "initial";
  bool json = false;
};

void run(ConvertArgs& a) {
  a.o.calib = a.calib;
  a.o.tokenizer = a.tokenizer;
  a.o.out = a.out;
  a.o.init = oal::convert::parse_kernel_init(a.init);
  const auto r = oal::convert::run_convert(a.o);
  if (a.json) {
    fmt::print("{}\n",
               nlohmann::json{{"method", r.method},
                              {"layers", r.layers},
                              {"layer_range", r.plan.range_rule},
                              {"kernel_start", r.plan.from_calibration ? "calibrated" : "initial"},
                              {"out", r.out.string()}}
                   .dump(2));
    return;
  }
  fmt::print("layer range: {}\n", r.plan.range_rule.empty() ? "none (softmax)" : r.plan.range_rule);
  fmt::print("converted layers [{}] to {} ({} parameters); written to {}\n",
             fmt::join(r.layers, ","), r.method, r.plan.from_calibration ? "calibrated" : "initial",
             r.out.string());
}

oal::cli::Registrar reg{
    "convert", "Write a hybrid model directory: layers replaced by a calibrated method",
    [](CLI::App& app) {
      auto a = std::make_shared<ConvertArgs>();
      app.add_option("--model", a->o.model, "Source model (HF dir, .gguf file or llama2.c .bin)")
          ->required();
      app.add_option("--calib", a->calib, "Calibration run directory (oal calibrate)");
      app.add_option("--method", a->o.method,
                     oal::attn::method_list(" | "))
          ->capture_default_str();
      app.add_option("--layers", a->o.layers,
                     "'default' (24+ layers: all but the first and last three, e.g. 3-20 of 24; "
                     "fewer: all but the first and last, e.g. 1-14 of 16), a list such as 1-3, or "
                     "auto:K (the K layers with the least attention beyond the window; needs "
                     "--layer-scores)")
          ->capture_default_str();
      app.add_option(
             "--init", a->init,
             "Kernel parameters: initial = baselines from their own initial values, OAL "
             "and global from calibration (paper App. F); calibrated = all from calibration")
          ->check(CLI::IsMember({"initial", "calibrated"}))
          ->capture_default_str();
      app.add_option("--sinks", a->o.window.sinks,
                     "Sink tokens attended exactly (must match the calibration run; with "
                     "--method window, no run is needed)")
          ->capture_default_str();
      app.add_option("--window", a->o.window.recent,
                     "Recent tokens attended exactly (must match the calibration run)")
          ->capture_default_str();
      app.add_option("--layer-scores", a->o.layer_scores,
                     "Scores from `oal layer-scores --out FILE`, for --layers auto:K");
      app.add_option("--out", a->out, "Output directory")->required();
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
