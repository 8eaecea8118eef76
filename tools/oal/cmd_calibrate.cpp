// `oal calibrate`: fit every method's kernel parameters against softmax on frozen
// q, k, v of a model (paper Eq. 20, App. B) and write a run directory.
#include <fmt/core.h>

#include <cstdlib>
#include <optional>

#include "calib_options.h"
#include "command.h"
#include "launch.h"
#include "oal/analysis/layer_selection.h"
#include "oal/attention/oal/kernel_json.h"
#include "oal/attention/registry.h"
#include "oal/calib/calibrate_model.h"
#include "oal/calib/layer_data.h"
#include "oal/calib/run_dir.h"
#include "oal/core/error.h"
#include "oal/dist/world.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/fingerprint.h"
#include "oal/formats/load.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "progress_bar.h"

namespace {

struct CalibrateArgs {
  std::string model, text, groups, tokenizer, out, layers, shard;
  int nproc = 1;
  std::string methods;  // empty: every method that runs with the window
  int64_t ctx = 256;
  oal::cli::SplitArgs split;
  oal::calib::CalibrationOptions options;
  bool quiet = false, json = false;
};

// This process's share of a --shard i/n run: every n-th of the chosen layers.
std::vector<int64_t> shard_layers(const std::vector<int64_t>& layers, const oal::calib::Shard& s) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < layers.size(); ++i)
    if (int64_t(i) % s.count == s.index) out.push_back(layers[i]);
  oal::check(!out.empty(), "calibrate",
             "--shard {}/{}: no layers left for this shard ({} layers in all)", s.index, s.count,
             layers.size());
  return out;
}

void run(const CalibrateArgs& a) {
  if (oal::cli::ran_as_launcher(a.nproc)) return;
  const auto world = oal::dist::world_from_env();
  oal::cli::exit_if_fault_injected(world->rank());
  const bool root = world->rank() == 0, quiet = a.quiet || !root;
  auto tok = oal::formats::open_tokenizer(a.model, a.tokenizer);
  const std::vector<int32_t> stream = tok->encode(oal::text::read_text_file(a.text), false);
  std::string fingerprint;
  const oal::model::Transformer model = [&] {
    const oal::model::ModelWeights w = oal::formats::load_model(a.model);
    fingerprint = oal::formats::model_fingerprint(w);
    return oal::model::Transformer(w);
  }();
  oal::calib::ModelCalibrationOptions o;
  o.ctx = a.ctx;
  o.layers = oal::analysis::resolve_layers(oal::cli::parse_layers(a.layers), model.num_layers());
  std::optional<oal::calib::Shard> shard;
  if (!a.shard.empty()) {
    shard = oal::calib::parse_shard(a.shard);
    shard->layers = o.layers;
    o.layers = shard_layers(o.layers, *shard);
  }
  o.split = a.split.parse();
  o.calibration = a.options;
  o.calibration.methods = oal::cli::methods_or_default(a.methods, a.options.window);
  o.calibration.world = world;
  std::optional<oal::attn::ModelKernels> groups;
  if (!a.groups.empty()) groups = oal::attn::read_kernels(a.groups);
  oal::calib::CalibrationResult r;
  {
    oal::cli::ProgressBar cap("capture", !quiet), fits("calibrate", !quiet);
    o.capture_progress = cap.fn();
    o.calibration.progress = fits.fn();
    r = oal::calib::calibrate_model(model, stream, groups ? &*groups : nullptr, o);
  }
  if (!root) return;  // rank 0 writes the run and reports
  oal::calib::write_run(a.out, r, o.calibration,
                        {a.model, a.text, a.ctx, o.split, fingerprint, shard});
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"out", a.out},
                                      {"seconds", {{"capture", r.capture_seconds},
                                                   {"fits", r.fit_seconds}}},
                                      {"fits", oal::calib::reports_json(r.reports)}}
                           .dump(2));
    return;
  }
  fmt::print("{:<14} {:>6} {:>5} {:<16} {:>12} {:>12} {:>6}\n", "method", "layer", "head",
             "init", "val MSE 0", "val MSE best", "at");
  for (const auto& f : r.reports)
    if (f.selected)
      fmt::print("{:<14} {:>6} {:>5} {:<16} {:>12.5g} {:>12.5g} {:>6}\n", f.method, f.layer,
                 f.head, f.init, f.initial_val, f.best_val, f.best_update);
  fmt::print("capture {:.1f} s, fits {:.1f} s (rank 0)\nwrote {}\n", r.capture_seconds,
             r.fit_seconds, a.out);
}

oal::cli::Registrar reg{
    "calibrate", "Fit kernel parameters of OAL and the baselines against softmax (Eq. 20)",
    [](CLI::App& app) {
      auto a = std::make_shared<CalibrateArgs>();
      app.add_option("--model", a->model, "HF model directory, .gguf file or llama2.c checkpoint")
          ->required();
      app.add_option("--text", a->text, "Text file: one token stream cut into ctx-token blocks")
          ->required();
      app.add_option("--groups", a->groups, "Kernel JSON from `oal group` (needed for oal)");
      app.add_option("--methods", a->methods,
                     "Comma-separated methods (of " + oal::attn::method_list() +
                         "; default: all that run with the window)");
      app.add_option("--layers", a->layers, "Layers, e.g. 0,2,4-7 (default: all)");
      app.add_option("--ctx", a->ctx, "Block length in tokens")->capture_default_str();
      app.add_option("--out", a->out, "Run directory to write")->required();
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      oal::cli::add_split_options(app, a->split);
      oal::cli::add_fit_options(app, a->options);
      app.add_option("--nproc", a->nproc,
                     "Run as N local processes (c10d, Gloo); across machines set MASTER_ADDR, "
                     "MASTER_PORT, RANK, WORLD_SIZE instead, as for torchrun")
          ->capture_default_str();
      app.add_option(
          "--shard", a->shard,
          "i/n: fit only every n-th layer from the i-th (0-based) and write a partial run; "
          "combine the n partial runs with `oal merge-calibration`");
      app.add_flag("--quiet", a->quiet, "No progress bars");
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
