// `oal linearize`: the whole path in one run directory — analyze (contribution scores),
// group (App. B), calibrate (Eq. 20, every method) and frozen-attention fidelity (Table 2).
#include <fmt/core.h>
#include <fmt/format.h>

#include <cstdlib>
#include <optional>

#include "calib_options.h"
#include "command.h"
#include "grouping_options.h"
#include "launch.h"
#include "oal/analysis/chi_statistic.h"
#include "oal/analysis/layer_groups.h"
#include "oal/attention/registry.h"
#include "oal/dist/world.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/fingerprint.h"
#include "oal/formats/load.h"
#include "oal/linearize/fidelity.h"
#include "oal/linearize/pipeline.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "progress_bar.h"

namespace {

namespace oa = oal::analysis;

struct LinearizeArgs {
  std::string model, text, tokenizer, out, layers, prompt_text;
  std::string methods;  // empty: every method that runs with the window
  int64_t ctx = 256, prompts = 40;
  oal::cli::SplitArgs split;
  oa::GroupingOptions grouping;
  oal::calib::CalibrationOptions options;
  bool quiet = false, json = false, resume = false;
  int nproc = 1;
};

void run(LinearizeArgs a) {
  if (oal::cli::ran_as_launcher(a.nproc)) return;
  // Several ranks share the calibration's fits; every rank analyses and groups (cheap,
  // deterministic), rank 0 alone writes files, evaluates fidelity and reports.
  const auto world = oal::dist::world_from_env();
  oal::cli::exit_if_fault_injected(world->rank());
  const bool root = world->rank() == 0;
  if (!root) a.quiet = true;
  auto tok = oal::formats::open_tokenizer(a.model, a.tokenizer);
  const std::string text = oal::text::read_text_file(a.text);
  const std::vector<int32_t> stream = tok->encode(text, false);
  std::optional<std::string> prompt_text;
  if (!a.prompt_text.empty()) prompt_text = oal::text::read_text_file(a.prompt_text);
  const oal::linearize::Splits splits =
      oal::linearize::make_splits(text, *tok, a.ctx, a.split.parse(), prompt_text);
  oal::linearize::PipelineOptions o;
  const oal::model::Transformer model = [&] {
    const oal::model::ModelWeights w = oal::formats::load_model(a.model);
    o.fingerprint = oal::formats::model_fingerprint(w);
    return oal::model::Transformer(w);
  }();
  o.model_name = a.model;
  o.text_name = a.text;
  o.layers = oal::cli::parse_layers(a.layers);
  o.prompts = a.prompts;
  o.grouping = a.grouping;
  o.calibration = a.options;
  o.calibration.methods = oal::cli::methods_or_default(a.methods, a.options.window);
  o.calibration.world = world;
  o.write = root;
  o.resume = a.resume;
  oal::cli::ProgressBar analyze("analyze", !a.quiet), group("group", !a.quiet),
      capture("capture", !a.quiet), calibrate("calibrate", !a.quiet), fcapture("capture", !a.quiet),
      fidelity("fidelity", !a.quiet);
  const auto r = oal::linearize::run_pipeline(
      model, stream, *tok, splits, o, a.out,
      {analyze.fn(), group.fn(), capture.fn(), calibrate.fn(), fcapture.fn(), fidelity.fn()});
  if (!root) return;
  if (!r.resumed.empty() && !a.quiet)
    fmt::print(stderr, "resumed from {}: {} read back\n", a.out, fmt::join(r.resumed, ", "));
  if (a.json) {
    nlohmann::json j = r.fidelity_json;
    j["resumed"] = r.resumed;  // steps read back from --out (empty: all computed)
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("grouping prompts: {}\ncontribution statistic: {}\n{}", splits.grouping_source,
             oa::chi_statistic_name(a.grouping.chi), oa::groups_summary_table(r.grouped));
  fmt::print("\nFrozen-attention fidelity: {} sequences x {} tokens\n{}", r.fidelity.sequences,
             r.fidelity.tokens_per_sequence, oal::linearize::fidelity_table(r.fidelity));
  fmt::print("wrote {} (pipeline.json, analysis.json, groups.json, calibration.json, "
             "kernels-*.json, baselines.safetensors, fidelity.json)\n", a.out);
}

oal::cli::Registrar reg{
    "linearize", "analyze -> group -> calibrate -> fidelity in one run directory",
    [](CLI::App& app) {
      auto a = std::make_shared<LinearizeArgs>();
      app.add_option("--model", a->model, "HF model directory, .gguf file or llama2.c checkpoint")
          ->required();
      app.add_option("--text", a->text, "Text file: prompts (paragraphs) and the token stream")
          ->required();
      app.add_option("--ctx", a->ctx, "Block / prompt length in tokens")->capture_default_str();
      app.add_option("--out", a->out, "Run directory")->required();
      app.add_option("--methods", a->methods,
                     "Comma-separated methods (of " + oal::attn::method_list() +
                         "; default: all that run with the window)");
      app.add_option("--layers", a->layers, "Layers (default: all)");
      app.add_option("--prompts", a->prompts, "Calibration prompts for the grouping")
          ->capture_default_str();
      app.add_option("--prompt-text", a->prompt_text,
                     "Text file of grouping prompts (paragraphs); default: the --text paragraphs "
                     "after the fitting/evaluation blocks, so the two never overlap");
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      oal::cli::add_split_options(app, a->split);
      oal::cli::add_grouping_options(app, a->grouping);
      // --seed belongs to the grouping options; the fitter reuses it.
      app.add_option("--max-updates", a->options.fit.max_updates, "Adam updates per fit (at most)")
          ->capture_default_str();
      app.add_option("--val-every", a->options.fit.val_every, "Validate every this many updates")
          ->capture_default_str();
      app.add_option("--patience", a->options.fit.patience,
                     "Stop after this many updates without improvement")
          ->capture_default_str();
      oal::cli::add_window_options(app, a->options.window);
      app.add_option("--nproc", a->nproc,
                     "Share the calibration's fits among N local processes (c10d, Gloo); across "
                     "machines set MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE instead")
          ->capture_default_str();
      app.add_flag("--resume", a->resume,
                   "Continue the run in --out: the analysis and calibration it already holds "
                   "are read back (its pipeline.json must hold the same settings)");
      app.add_flag("--quiet", a->quiet, "No progress bars");
      app.add_flag("--json", a->json, "Print the fidelity JSON");
      return [a] {
        a->options.seed = a->grouping.seed;
        run(*a);
      };
    }};

}  // namespace
