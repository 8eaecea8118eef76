#pragma once
// Grouping every analysed (layer, head) of an analysis, and the result's summary
// (what `oal group` prints) and kernel initialisation (what it writes).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "oal/analysis/analyze.h"
#include "oal/analysis/grouping.h"
#include "oal/attention/oal/kernel_json.h"
#include "oal/attention/oal/quadratic.h"
#include "oal/core/progress.h"

namespace oal::analysis {

struct LayerGroups {
  int64_t layer = 0;
  std::vector<Grouping> heads;  // one per query head, in head order
};

// budget == 0: the App. B procedure with `options` on each head's per-prompt rows of the
// statistic options.chi (signed χ or magnitudes A; an analysis written before --chi has
// no per-prompt A, so mean-abs then throws asking for a re-run or --chi signed).
// budget >= 1: the fixed-budget grouping (G = budget) of each head's statistic profile;
// other options unused except validation. Progress: ("heads").
std::vector<LayerGroups> group_analysis(const AnalysisResult& analysis,
                                        const GroupingOptions& options, int64_t budget = 0,
                                        const ProgressFn& progress = {});

// Taylor-initialised kernels (1 + s + s²/2 embedded into the groups, QuadraticKernel::taylor)
// per head, so coefficient fitting can start from them.
std::vector<attn::QuadraticKernel> taylor_kernels(const LayerGroups& layer,
                                                  double eps = attn::k_default_eps);

// Every layer's Taylor-initialised kernels as one kernel file's content: head_dim, layers,
// `meta` plus meta["grouping"] = groups_summary_json without its per-layer part (the
// layers themselves hold the groups). What `oal group` and `oal linearize` write.
attn::ModelKernels grouped_kernels(const std::vector<LayerGroups>& layers, int64_t head_dim,
                                   const GroupingOptions& options, int64_t budget,
                                   nlohmann::json meta, double eps = attn::k_default_eps);

// Machine-readable summary: the options (with "chi_statistic"); per layer/head the group count,
// natural-cut count, groups (dims), outlier dims (all non-bulk dims) and candidate cuts (k, ρ, S,
// natural, chosen).
nlohmann::json groups_summary_json(const std::vector<LayerGroups>& layers,
                                   const GroupingOptions& options, int64_t budget);

// The statistic a kernel JSON's groups were formed with: meta.grouping.chi_statistic;
// files written before --chi existed have none and mean "signed".
ChiStatistic kernels_chi_statistic(const nlohmann::json& meta);

// Human-readable table: layer, head, G, natural cuts, bulk size, outlier dims by group,
// then the group-count histogram.
std::string groups_summary_table(const std::vector<LayerGroups>& layers);

}  // namespace oal::analysis
