// `oal diagnose`: error concentration on high-contribution dimensions (paper §3.2,
// App. A.2, Table 1): retained-error ratio R_S per baseline, Gaussian control and the
// matched randomization test.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include "calib_options.h"
#include "command.h"
#include "grouping_options.h"
#include "oal/analysis/layer_groups.h"
#include "oal/attention/oal/kernel_json.h"
#include "oal/attention/registry.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/load.h"
#include "oal/linearize/diagnose_run.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "progress_bar.h"

namespace {

struct DiagnoseArgs {
  std::string model, text, groups, tokenizer, layers,
      methods = fmt::format(
          "{}", fmt::join(oal::attn::method_names(oal::attn::MethodKind::feature_map), ","));
  int64_t ctx = 256, seeds = 5;
  oal::cli::SplitArgs split;
  oal::linearize::DiagnoseOptions options;
  bool json = false, quiet = false;
};

void run(DiagnoseArgs a) {
  auto tok = oal::formats::open_tokenizer(a.model, a.tokenizer);
  const std::vector<int32_t> stream = tok->encode(oal::text::read_text_file(a.text), false);
  const oal::model::Transformer model(oal::formats::load_model(a.model));
  const oal::attn::ModelKernels groups = oal::attn::read_kernels(a.groups);
  a.options.methods = oal::split_names(a.methods);
  a.options.seeds.clear();
  for (int64_t s = 0; s < a.seeds; ++s) a.options.seeds.push_back(uint64_t(s));
  oal::linearize::DiagnoseResult r;
  {
    oal::cli::ProgressBar capture("capture", !a.quiet), bar("diagnose", !a.quiet);
    a.options.progress = bar.fn();
    r = oal::linearize::diagnose_run(model, stream, a.ctx, a.split.parse(), groups,
                                     oal::cli::parse_layers(a.layers), a.options, capture.fn());
  }
  const std::string groups_chi =
      oal::analysis::chi_statistic_name(oal::analysis::kernels_chi_statistic(groups.meta));
  const std::string gauss_chi = oal::analysis::chi_statistic_name(a.options.grouping.chi);
  if (a.json) {
    nlohmann::json j = oal::linearize::diagnose_json(r);
    j["groups_chi_statistic"] = groups_chi;
    j["gaussian_chi_statistic"] = gauss_chi;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("groups: {} (chi {}); Gaussian control grouped with chi {} on {} prompts\n{}",
             a.groups, groups_chi, gauss_chi, a.options.gaussian_prompts,
             oal::linearize::diagnose_table(r));
}

oal::cli::Registrar reg{
    "diagnose", "Error concentration on high-contribution dimensions (Table 1)",
    [](CLI::App& app) {
      auto a = std::make_shared<DiagnoseArgs>();
      app.add_option("--model", a->model, "HF model directory, .gguf file or llama2.c checkpoint")
          ->required();
      app.add_option("--text", a->text, "Text file (evaluation blocks are used)")->required();
      app.add_option("--groups", a->groups, "Kernel JSON from `oal group` (bulk = group 0)")
          ->required();
      app.add_option("--layers", a->layers, "Layers (default: all in the groups file)");
      app.add_option("--methods", a->methods, "Comma-separated feature-map baselines")
          ->capture_default_str();
      app.add_option("--ctx", a->ctx, "Block length in tokens")->capture_default_str();
      app.add_option("--positions", a->options.positions, "Sampled query positions per sequence")
          ->capture_default_str();
      app.add_option("--seeds", a->seeds, "Random seeds 0..n-1 of stochastic methods")
          ->capture_default_str();
      app.add_option("--controls", a->options.controls, "Matched random subsets B (0: skip)")
          ->capture_default_str();
      app.add_option("--gaussian-prompts", a->options.gaussian_prompts,
                     "Gaussian control: its groups come from this many fresh N(0,1) prompts of "
                     "--ctx tokens (calibration shape), apart from the evaluation samples")
          ->capture_default_str();
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      oal::cli::add_split_options(app, a->split);
      oal::cli::add_grouping_options(app, a->options.grouping);
      app.add_flag("--json", a->json, "Machine-readable output");
      app.add_flag("--quiet", a->quiet, "No progress bars");
      return [a] {
        a->options.seed = a->options.grouping.seed;
        run(*a);
      };
    }};

}  // namespace
