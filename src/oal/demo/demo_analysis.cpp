#include "oal/demo/demo_analysis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "oal/analysis/analyze.h"
#include "oal/analysis/layer_groups.h"
#include "oal/fixtures/synthetic.h"
#include "oal/model/transformer.h"

namespace oal::demo {
namespace {

// Deterministic random token ids in [3, vocab), lengths 16..36.
std::vector<std::vector<int32_t>> random_prompts(int64_t count, int64_t vocab, uint64_t seed) {
  std::vector<std::vector<int32_t>> out;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
  for (int64_t p = 0; p < count; ++p) {
    std::vector<int32_t> ids(static_cast<size_t>(16 + (p * 7) % 21));
    for (auto& id : ids) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      id = static_cast<int32_t>(3 + (x >> 33) % static_cast<uint64_t>(vocab - 3));
    }
    out.push_back(std::move(ids));
  }
  return out;
}

}  // namespace

DemoSection analysis_demo(const AnalysisDemoOptions& o, const ProgressFn& progress) {
  fixtures::SyntheticOptions so;
  so.hidden_size = o.hidden;
  so.intermediate_size = 2 * o.hidden;
  so.num_layers = o.layers;
  so.num_heads = o.heads;
  so.num_kv_heads = o.kv_heads;
  so.head_dim = o.head_dim;
  so.planted_pairs = o.planted_pairs;
  so.planted_scale = o.planted_scale;
  so.seed = o.seed;
  const model::Transformer model(fixtures::make_synthetic_weights(so));
  const auto planted = fixtures::synthetic_planted_dims(so);
  const int64_t vocab = model.config().vocab_size;

  analysis::PromptSet prompts;
  prompts.calibration = random_prompts(o.prompts, vocab, o.seed + 1);
  prompts.heldout = random_prompts(o.heldout, vocab, o.seed + 2);
  prompts.prefix_sequence = random_prompts(1, vocab, o.seed + 3)[0];
  analysis::AnalyzeOptions ao;
  ao.seed = o.seed;
  ao.progress = progress;
  const analysis::AnalysisResult r = analysis::analyze_model(model, prompts, ao);
  analysis::GroupingOptions go;
  go.bootstrap = o.bootstrap;
  go.seed = o.seed;
  const auto groups = analysis::group_analysis(r, go);

  DemoSection s;
  s.title = "Contribution analysis and grouping (synthetic model, planted outlier dims)";
  s.notes = {fmt::format("synthetic Llama-shaped model: {} layers, {} query / {} KV heads, d = {}, "
                         "{} planted RoPE pair(s) per layer (scale {})",
                         o.layers, o.heads, o.kv_heads, o.head_dim, o.planted_pairs,
                         o.planted_scale),
             fmt::format("{} calibration + {} held-out prompts of random tokens; App. B grouping "
                         "with alpha {}, tau {}, gamma {}, G_min {}, B = {}",
                         o.prompts, o.heldout, go.alpha, go.tau, go.gamma, go.g_min, go.bootstrap),
             "share = top-k share of the contribution magnitude (docs/analysis.md); Gaussian = the "
             "same statistic for i.i.d. N(0,1) q/k of the same shape",
             "planted out of bulk = every planted dimension lies outside group 0"};
  s.columns = {"layer",        "head",
               "planted",      fmt::format("top dims ({})", analysis::chi_statistic_name(r.chi)),
               "share",        "Gaussian",
               "held-out rho", "G",
               "outlier dims", "planted out of bulk"};
  nlohmann::json heads = nlohmann::json::array();
  for (size_t l = 0; l < r.layers.size(); ++l)
    for (size_t h = 0; h < r.layers[l].heads.size(); ++h) {
      const auto& x = r.layers[l].heads[h];
      const auto& g = groups[l].heads[h];
      std::vector<int64_t> outliers;
      for (size_t k = 1; k < g.groups.size(); ++k)
        outliers.insert(outliers.end(), g.groups[k].begin(), g.groups[k].end());
      std::sort(outliers.begin(), outliers.end());
      const bool out_of_bulk = std::all_of(planted[l].begin(), planted[l].end(),
                                           [&](int64_t d) { return g.group_of[d] != 0; });
      s.rows.push_back({std::to_string(r.layers[l].layer), std::to_string(x.head),
                        fmt::format("{}", fmt::join(planted[l], ",")),
                        fmt::format("{}", fmt::join(x.top_dims, ",")),
                        fmt::format("{:.1f}%", 100 * x.top_share),
                        fmt::format("{:.1f}%", 100 * x.gaussian_top_share),
                        fmt::format("{:.3f}", x.heldout_spearman), std::to_string(g.num_groups()),
                        fmt::format("{}", fmt::join(outliers, ",")), out_of_bulk ? "yes" : "no"});
      heads.push_back({{"layer", r.layers[l].layer}, {"head", x.head}, {"planted", planted[l]},
                       {"top_dims", x.top_dims}, {"top_share", x.top_share},
                       {"gaussian_top_share", x.gaussian_top_share},
                       {"heldout_spearman", x.heldout_spearman}, {"groups", g.groups},
                       {"planted_out_of_bulk", out_of_bulk}});
    }
  s.data = {{"heads", heads}};
  return s;
}

}  // namespace oal::demo
