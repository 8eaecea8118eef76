// `oal analyze`: contribution scores, heterogeneity statistics and figures of a model on
// the paragraphs of a text (paper §3, App. A); writes DIR/analysis.json and SVGs.
#include <fmt/core.h>

#include <filesystem>
#include <limits>

#include "command.h"
#include "grouping_options.h"
#include "oal/analysis/analysis_json.h"
#include "oal/analysis/figures.h"
#include "oal/analysis/layer_groups.h"
#include "oal/core/error.h"
#include "oal/core/ranges.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/load.h"
#include "oal/io/atomic_file.h"
#include "oal/linearize/analysis_step.h"
#include "oal/linearize/splits.h"
#include "oal/text/corpus.h"
#include "progress_bar.h"

namespace {

namespace oa = oal::analysis;
namespace fs = std::filesystem;

struct AnalyzeArgs {
  std::string model, text, tokenizer, layers, out;
  oa::PromptOptions prompts;
  int64_t top_k = 5;
  // Skip the paragraphs within the text's first N tokens; -1 (default): the blocks of
  // calibrate's default split (26 × ctx), so the prompts never overlap them.
  int64_t after_tokens = -1;
  oa::GroupingOptions grouping;
  bool json = false, quiet = false;
};

// Writes the figures; returns their paths.
std::vector<std::string> write_figures(const fs::path& dir, const oa::AnalysisResult& r,
                                       const std::vector<oa::LayerGroups>& groups) {
  std::vector<std::string> files;
  auto put = [&](const std::string& name, const std::string& svg) {
    oal::io::write_file_atomic(dir / name, svg);
    files.push_back((dir / name).string());
  };
  for (size_t i = 0; i < r.layers.size(); ++i)
    put(fmt::format("contribution_layer{}.svg", r.layers[i].layer),
        oa::contribution_profile_svg(r.layers[i], groups[i].heads, r.model));
  put("activation_profile.svg", oa::activation_profile_svg(r));
  put("top_share_heatmap.svg", oa::top_share_heatmap_svg(r));
  return files;
}

nlohmann::json summary_json(const oa::AnalysisResult& r,
                            const std::vector<oa::LayerGroups>& groups) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const auto& l = r.layers[i];
    nlohmann::json heads = nlohmann::json::array();
    for (size_t h = 0; h < l.heads.size(); ++h) {
      const auto& x = l.heads[h];
      heads.push_back({{"head", x.head}, {"top_dims", x.top_dims}, {"top_share", x.top_share},
                       {"gaussian_top_share", x.gaussian_top_share},
                       {"heldout_spearman", x.heldout_spearman},
                       {"heldout_top_overlap", x.heldout_top_overlap},
                       {"group_count", groups[i].heads[h].num_groups()}});
    }
    layers.push_back({{"layer", l.layer}, {"activation_top_values", l.activation.top_values},
                      {"activation_top_dims", l.activation.top_dims},
                      {"activation_median", l.activation.median}, {"heads", heads}});
  }
  return {{"layers", layers}};
}

void print_table(const oa::AnalysisResult& r, const std::vector<oa::LayerGroups>& groups) {
  fmt::print("{:>5} {:>4} {:>14} {:>8} {:>8} {:>7} {:>7} {:>2}\n", "layer", "head", "top dims",
             "share", "gauss", "rho", "overlap", "G");
  for (size_t i = 0; i < r.layers.size(); ++i)
    for (size_t h = 0; h < r.layers[i].heads.size(); ++h) {
      const auto& x = r.layers[i].heads[h];
      std::string dims;
      for (size_t t = 0; t < x.top_dims.size() && t < 3; ++t)
        dims += (t ? "," : "") + std::to_string(x.top_dims[t]);
      fmt::print("{:>5} {:>4} {:>14} {:>7.1f}% {:>7.1f}% {:>7.3f} {:>4}/{:<2} {:>2}\n",
                 r.layers[i].layer, x.head, dims, 100 * x.top_share, 100 * x.gaussian_top_share,
                 x.heldout_spearman, x.heldout_top_overlap, r.top_k,
                 groups[i].heads[h].num_groups());
    }
  for (const auto& l : r.layers)
    if (!l.activation.top_values.empty())
      fmt::print("layer {:>3} residual max|x|: top-1 {:.3g} (dim {}), median {:.3g}\n", l.layer,
                 l.activation.top_values[0], l.activation.top_dims[0], l.activation.median);
}

void run(const AnalyzeArgs& a) {
  auto tok = oal::formats::open_tokenizer(a.model, a.tokenizer);
  const oal::model::Transformer model(oal::formats::load_model(a.model));
  oal::linearize::AnalysisStepOptions o;
  const fs::path model_path = fs::path(a.model).lexically_normal();
  o.model_name = model_path.has_filename() ? model_path.filename().string()
                                           : model_path.parent_path().filename().string();
  o.prompts = a.prompts;
  if (!a.layers.empty())
    o.analyze.layers = oal::parse_index_list(a.layers, "analyze --layers", model.num_layers());
  o.analyze.top_k = a.top_k;
  o.analyze.seed = a.grouping.seed;
  o.analyze.chi = a.grouping.chi;
  oa::validate(a.grouping);
  const auto paragraphs = oal::linearize::analysis_paragraphs(
      oal::text::read_text_file(a.text), *tok, a.prompts.ctx, a.after_tokens);
  oal::linearize::AnalysisAndGroups step;
  {
    oal::cli::ProgressBar analyze_bar("analyze", !a.quiet), group_bar("group", !a.quiet);
    step = oal::linearize::analyze_and_group(model, *tok, paragraphs, o, a.grouping,
                                             analyze_bar.fn(), group_bar.fn());
  }
  const oa::AnalysisResult& r = step.analysis;
  const std::vector<oa::LayerGroups>& groups = step.grouped;
  fs::create_directories(a.out);
  oa::write_analysis(fs::path(a.out) / "analysis.json", r);
  const auto files = write_figures(a.out, r, groups);
  if (a.json) {
    nlohmann::json j = summary_json(r, groups);
    j["analysis"] = (fs::path(a.out) / "analysis.json").string();
    j["chi_statistic"] = oa::chi_statistic_name(r.chi);
    j["figures"] = files;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("contribution statistic: {}\n", oa::chi_statistic_name(r.chi));
  print_table(r, groups);
  fmt::print("wrote {} and {} figures to {}\n", "analysis.json", files.size(), a.out);
}

oal::cli::Registrar reg{
    "analyze", "Contribution scores, heterogeneity statistics and figures (paper Sec. 3, App. A)",
    [](CLI::App& app) {
      auto a = std::make_shared<AnalyzeArgs>();
      app.add_option("--model", a->model, "HF model directory, .gguf file or llama2.c checkpoint")
          ->required();
      app.add_option("--text", a->text, "Text file; blank-line separated paragraphs are prompts")
          ->required();
      app.add_option("--out", a->out, "Output directory")->required();
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer (default: beside the model)");
      app.add_option("--layers", a->layers, "Layers, e.g. 0,2,4-7 (default: all)");
      app.add_option("--ctx", a->prompts.ctx, "Max tokens per prompt; prefix-study length")
          ->capture_default_str();
      app.add_option("--prompts", a->prompts.calibration, "Calibration prompts K")
          ->capture_default_str();
      app.add_option("--heldout-fraction", a->prompts.heldout_fraction,
                     "Held-out prompts = round(F K), the paragraphs after the calibration ones")
          ->capture_default_str();
      app.add_option("--after-tokens", a->after_tokens,
                     "Prompts only from the paragraphs after the text's first N tokens, so they "
                     "stay disjoint from blocks cut from the same text; default: 26 x ctx, the "
                     "blocks of oal calibrate's default split; 0 = from the start")
          ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
      app.add_option("--top-k", a->top_k, "k of the top-k share and overlap")
          ->capture_default_str();
      oal::cli::add_grouping_options(app, a->grouping);
      app.add_flag("--json", a->json, "Machine-readable summary on stdout");
      app.add_flag("--quiet", a->quiet, "No progress bar");
      return [a] { run(*a); };
    }};

}  // namespace
