#include "oal/analysis/layer_groups.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "oal/core/error.h"

namespace oal::analysis {
namespace {

// [P][d] rows → [P, d] fp64; an undefined tensor when there are none (old files).
at::Tensor rows_tensor(const std::vector<std::vector<double>>& rows, int64_t head) {
  if (rows.empty()) return {};
  const auto p = static_cast<int64_t>(rows.size());
  const auto d = static_cast<int64_t>(rows[0].size());
  at::Tensor t = at::empty({p, d}, at::kDouble);
  for (int64_t i = 0; i < p; ++i) {
    check(static_cast<int64_t>(rows[i].size()) == d, "group",
          "head {}: per-prompt rows differ in length", head);
    std::copy(rows[i].begin(), rows[i].end(), t[i].data_ptr<double>());
  }
  return t;
}

// The per-prompt rows the chosen statistic groups on (chi_statistic.h).
at::Tensor statistic_tensor(const HeadAnalysis& h, ChiStatistic stat) {
  check(!h.chi_per_prompt.empty(), "group", "head {}: no per-prompt chi", h.head);
  return statistic_rows(stat, rows_tensor(h.chi_per_prompt, h.head),
                        rows_tensor(h.magnitude_per_prompt, h.head));
}

// The statistic's profile for the fixed-budget variant.
std::vector<double> statistic_of(const HeadAnalysis& h, ChiStatistic stat) {
  check(stat != ChiStatistic::mean_abs || !h.magnitude.empty(), "group",
        "head {}: --chi mean-abs needs magnitudes; the analysis has none", h.head);
  return statistic_profile(stat, h.chi, h.magnitude);
}

std::string dims_str(const std::vector<int64_t>& dims) {
  return fmt::format("{{{}}}", fmt::join(dims, ","));
}

}  // namespace

std::vector<LayerGroups> group_analysis(const AnalysisResult& analysis,
                                        const GroupingOptions& options, int64_t budget,
                                        const ProgressFn& progress) {
  validate(options);
  check(budget >= 0 && budget <= analysis.head_dim, "group",
        "--budget {}: expected 0 (adaptive) or 1..{} (head dim)", budget, analysis.head_dim);
  std::vector<LayerGroups> out;
  const int64_t total = static_cast<int64_t>(analysis.layers.size()) * analysis.num_heads;
  int64_t done = 0;
  for (const auto& l : analysis.layers) {
    LayerGroups lg{l.layer, {}};
    for (const auto& h : l.heads) {
      lg.heads.push_back(budget > 0
                             ? group_fixed_budget(statistic_of(h, options.chi), budget)
                             : group_dimensions(statistic_tensor(h, options.chi), options));
      report(progress, ++done, total, "heads");
    }
    out.push_back(std::move(lg));
  }
  return out;
}

std::vector<attn::QuadraticKernel> taylor_kernels(const LayerGroups& layer, double eps) {
  std::vector<attn::QuadraticKernel> kernels;
  for (const auto& g : layer.heads) kernels.push_back(attn::QuadraticKernel::taylor(g.groups, eps));
  return kernels;
}

nlohmann::json groups_summary_json(const std::vector<LayerGroups>& layers,
                                   const GroupingOptions& o, int64_t budget) {
  nlohmann::json j_layers = nlohmann::json::array();
  for (const auto& l : layers) {
    nlohmann::json heads = nlohmann::json::array();
    for (size_t h = 0; h < l.heads.size(); ++h) {
      const Grouping& g = l.heads[h];
      std::vector<int64_t> outliers;
      for (size_t k = 1; k < g.groups.size(); ++k)
        outliers.insert(outliers.end(), g.groups[k].begin(), g.groups[k].end());
      nlohmann::json cands = nlohmann::json::array();
      for (const auto& c : g.candidates)
        cands.push_back({{"k", c.k}, {"rho", c.rho}, {"support", c.support},
                         {"natural", c.natural}, {"chosen", c.chosen}});
      heads.push_back({{"head", h}, {"group_count", g.num_groups()},
                       {"natural_cuts", g.natural_cuts}, {"groups", g.groups},
                       {"outlier_dims", outliers}, {"cuts", g.cuts}, {"candidates", cands}});
    }
    j_layers.push_back({{"layer", l.layer}, {"heads", heads}});
  }
  return {{"method", budget > 0 ? "fixed_budget" : "bootstrap"},
          {"budget", budget},
          {"chi_statistic", chi_statistic_name(o.chi)},
          {"alpha", o.alpha},
          {"tau", o.tau},
          {"gamma", o.gamma},
          {"g_min", o.g_min},
          {"bootstrap", o.bootstrap},
          {"seed", o.seed},
          {"eps", o.eps},
          {"layers", j_layers}};
}

ChiStatistic kernels_chi_statistic(const nlohmann::json& meta) {
  if (!meta.is_object() || !meta.contains("grouping")) return ChiStatistic::signed_mean;
  const nlohmann::json& g = meta.at("grouping");
  if (!g.is_object() || !g.contains("chi_statistic")) return ChiStatistic::signed_mean;
  check(g.at("chi_statistic").is_string(), "group",
        "kernel meta.grouping.chi_statistic: expected a string");
  return parse_chi_statistic(g.at("chi_statistic").get<std::string>());
}

std::string groups_summary_table(const std::vector<LayerGroups>& layers) {
  std::string s = fmt::format("{:>5} {:>4} {:>2} {:>7} {:>4}  {}\n", "layer", "head", "G",
                              "natural", "bulk", "outlier dims (group 1, 2, ...)");
  std::map<int64_t, int64_t> histogram;
  for (const auto& l : layers)
    for (size_t h = 0; h < l.heads.size(); ++h) {
      const Grouping& g = l.heads[h];
      std::string outl;
      for (size_t k = 1; k < g.groups.size(); ++k)
        outl += (k > 1 ? " " : "") + dims_str(g.groups[k]);
      s += fmt::format("{:>5} {:>4} {:>2} {:>7} {:>4}  {}\n", l.layer, h, g.num_groups(),
                       g.natural_cuts, g.groups[0].size(), outl);
      ++histogram[g.num_groups()];
    }
  s += "group counts:";
  for (const auto& [count, heads] : histogram) s += fmt::format("  G={}: {} heads", count, heads);
  return s + "\n";
}

attn::ModelKernels grouped_kernels(const std::vector<LayerGroups>& layers, int64_t head_dim,
                                   const GroupingOptions& options, int64_t budget,
                                   nlohmann::json meta, double eps) {
  attn::ModelKernels kernels;
  kernels.head_dim = head_dim;
  for (const auto& l : layers) kernels.layers[l.layer] = taylor_kernels(l, eps);
  meta["grouping"] = groups_summary_json(layers, options, budget);
  meta["grouping"].erase("layers");
  kernels.meta = std::move(meta);
  return kernels;
}

}  // namespace oal::analysis
