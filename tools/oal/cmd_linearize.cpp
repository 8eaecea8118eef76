// `oal linearize`: the whole path in one run directory — analyze (contribution scores),
// group (App. B), calibrate (Eq. 20, every method) and frozen-attention fidelity (Table 2).
#include <fmt/core.h>

#include <cstdlib>

#include "calib_options.h"
#include "command.h"
#include "launch.h"
#include "oal/dist/world.h"
#include "grouping_options.h"
#include "oal/attention/registry.h"
#include "oal/analysis/analysis_json.h"
#include "oal/analysis/analyze.h"
#include "oal/analysis/layer_groups.h"
#include "oal/attention/kernel_json.h"
#include "oal/calib/pipeline.h"
#include "oal/calib/run_dir.h"
#include "oal/eval/fidelity_run.h"
#include "oal/io/atomic_file.h"
#include "oal/model/fingerprint.h"
#include "oal/model/find_tokenizer.h"
#include "oal/model/load.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "progress_bar.h"

namespace {

namespace oa = oal::analysis;

struct LinearizeArgs {
  std::string model, text, tokenizer, out, layers, prompt_text;
  std::string methods = oal::attn::method_list(",");
  int64_t ctx = 256, prompts = 40;
  oal::cli::SplitArgs split;
  oa::GroupingOptions grouping;
  oal::calib::CalibrationOptions options;
  bool quiet = false, json = false;
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
  const std::filesystem::path dir(a.out);
  if (root) std::filesystem::create_directories(dir);
  auto tok = oal::text::load_tokenizer(oal::model::find_tokenizer(a.model, a.tokenizer));
  const std::string text = oal::text::read_text_file(a.text);
  const std::vector<int32_t> stream = tok->encode(text, false);
  std::string fingerprint;
  const oal::model::Transformer model = [&] {
    const oal::model::ModelWeights w = oal::model::load_model(a.model);
    fingerprint = oal::model::model_fingerprint(w);
    return oal::model::Transformer(w);
  }();
  const std::vector<int64_t> layers = oal::cli::parse_layers(a.layers);

  // 1. Contribution analysis on grouping prompts disjoint from the blocks: a separate
  // prompt file, or the text's paragraphs after the blocks the split uses.
  oa::PromptOptions po;
  po.calibration = a.prompts;
  po.ctx = a.ctx;
  const oal::calib::BlockSplit split = a.split.parse();
  const std::vector<std::string> paragraphs =
      a.prompt_text.empty()
          ? oa::paragraphs_after_tokens(oal::text::split_paragraphs(text), *tok,
                                        split.blocks_needed() * a.ctx)
          : oal::text::split_paragraphs(oal::text::read_text_file(a.prompt_text));
  const oa::PromptSet prompts = oa::make_prompt_set(paragraphs, *tok, po);
  oa::AnalysisResult analysis;
  {
    oal::cli::ProgressBar bar("analyze", !a.quiet);
    oa::AnalyzeOptions ao;
    ao.layers = layers;
    ao.chi = a.grouping.chi;
    ao.progress = bar.fn();
    analysis = oa::analyze_model(model, prompts, ao);
  }
  analysis.model = a.model;
  if (root) oa::write_analysis(dir / "analysis.json", analysis);
  // 2. Grouping.
  std::vector<oa::LayerGroups> grouped;
  {
    oal::cli::ProgressBar bar("group", !a.quiet);
    grouped = oa::group_analysis(analysis, a.grouping, 0, bar.fn());
  }
  oal::attn::ModelKernels groups;
  groups.head_dim = analysis.head_dim;
  for (const auto& l : grouped) groups.layers[l.layer] = oa::taylor_kernels(l);
  groups.meta = {{"source", "oal linearize"},
                 {"model", a.model},
                 {"grouping", oa::groups_summary_json(grouped, a.grouping, 0)}};
  groups.meta["grouping"].erase("layers");
  if (root) oal::attn::write_kernels(dir / "groups.json", groups);
  // 3. Calibration.
  oal::calib::ModelCalibrationOptions co;
  co.ctx = a.ctx;
  co.layers = layers;
  co.split = split;
  co.calibration = a.options;
  co.calibration.methods = oal::cli::split_names(a.methods);
  co.calibration.world = world;
  oal::calib::CalibrationResult calibrated;
  {
    oal::cli::ProgressBar cap("capture", !a.quiet), bar("calibrate", !a.quiet);
    co.capture_progress = cap.fn();
    co.calibration.progress = bar.fn();
    calibrated = oal::calib::calibrate_model(model, stream, &groups, co);
  }
  if (!root) return;
  oal::calib::write_run(dir, calibrated, co.calibration, {a.model, a.text, a.ctx, co.split, fingerprint});
  // 4. Fidelity on the held-out blocks.
  oal::eval::FidelityResult fid;
  {
    oal::cli::ProgressBar cap("capture", !a.quiet), bar("fidelity", !a.quiet);
    fid = oal::eval::evaluate_run(model, stream, a.ctx, co.split, calibrated.layers, layers, {},
                                  cap.fn(), bar.fn());
  }
  nlohmann::json j = oal::eval::fidelity_json(fid);
  j["model"] = a.model;
  j["chi_statistic"] = oa::chi_statistic_name(a.grouping.chi);
  j["text"] = a.text;
  const std::string prompts_note =
      a.prompt_text.empty()
          ? fmt::format("paragraphs of --text after the first {} tokens (blocks 0..{})",
                        split.blocks_needed() * a.ctx, split.blocks_needed() - 1)
          : a.prompt_text;
  j["grouping_prompts"] = prompts_note;
  j["ctx"] = a.ctx;
  oal::io::write_file_atomic(dir / "fidelity.json", j.dump(2) + "\n");
  if (a.json) {
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("grouping prompts: {}\ncontribution statistic: {}\n{}", prompts_note,
             oa::chi_statistic_name(a.grouping.chi), oa::groups_summary_table(grouped));
  fmt::print("\nFrozen-attention fidelity: {} sequences x {} tokens\n{}", fid.sequences,
             fid.tokens_per_sequence, oal::eval::fidelity_table(fid));
  fmt::print("wrote {} (analysis.json, groups.json, calibration.json, kernels-*.json, "
             "baselines.safetensors, fidelity.json)\n", dir.string());
}

oal::cli::Registrar reg{
    "linearize", "analyze -> group -> calibrate -> fidelity in one run directory",
    [](CLI::App& app) {
      auto a = std::make_shared<LinearizeArgs>();
      app.add_option("--model", a->model, "HF model directory, .gguf file or llama2.c checkpoint")->required();
      app.add_option("--text", a->text, "Text file: prompts (paragraphs) and the token stream")
          ->required();
      app.add_option("--ctx", a->ctx, "Block / prompt length in tokens")->capture_default_str();
      app.add_option("--out", a->out, "Run directory")->required();
      app.add_option("--methods", a->methods, "Comma-separated methods (of " + oal::attn::method_list() + ")")->capture_default_str();
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
      app.add_option("--nproc", a->nproc,
                     "Share the calibration's fits among N local processes (c10d, Gloo); across "
                     "machines set MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE instead")
          ->capture_default_str();
      app.add_flag("--quiet", a->quiet, "No progress bars");
      app.add_flag("--json", a->json, "Print the fidelity JSON");
      return [a] {
        a->options.seed = a->grouping.seed;
        run(*a);
      };
    }};

}  // namespace
