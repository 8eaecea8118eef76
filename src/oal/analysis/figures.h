#pragma once
// SVG figures of an analysis (written by `oal analyze`):
//   contribution profile per layer (Fig. 1c/2a): one panel per query head, χ of the d
//     dimensions sorted ascending (bar label = dimension index), bars coloured by group;
//   activation profile (Fig. 7): top-1/2/3 and median per-dimension max |activation| of
//     the residual stream against the layer index;
//   top-k share heat map over layers × heads.
#include <string>
#include <vector>

#include "oal/analysis/analyze.h"
#include "oal/analysis/grouping.h"

namespace oal::analysis {

// groups[h] is head h's grouping (same order as layer.heads).
std::string contribution_profile_svg(const LayerAnalysis& layer,
                                     const std::vector<Grouping>& groups,
                                     const std::string& model_name);

// Needs at least one layer with an activation summary.
std::string activation_profile_svg(const AnalysisResult& result);

std::string top_share_heatmap_svg(const AnalysisResult& result);

}  // namespace oal::analysis
