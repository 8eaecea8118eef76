#include "oal/analysis/figures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "oal/core/error.h"
#include "oal/figures/svg_bars.h"
#include "oal/figures/svg_canvas.h"
#include "oal/figures/svg_heatmap.h"
#include "oal/figures/svg_lines.h"

namespace oal::analysis {

std::string contribution_profile_svg(const LayerAnalysis& layer,
                                     const std::vector<Grouping>& groups,
                                     const std::string& model_name) {
  check(groups.size() == layer.heads.size(), "figures", "{} groupings for {} heads", groups.size(),
        layer.heads.size());
  std::vector<figures::BarPanel> panels;
  int64_t max_groups = 0;
  for (size_t h = 0; h < layer.heads.size(); ++h) {
    const HeadAnalysis& head = layer.heads[h];
    figures::BarPanel p;
    p.title =
        fmt::format("head {} (kv {}), G = {}", head.head, head.kv_head, groups[h].num_groups());
    for (int64_t r : head.order) {
      p.values.push_back(head.score.empty() ? head.chi[r] : head.score[r]);
      p.colors.push_back(static_cast<int>(groups[h].group_of.at(r)));
      p.bar_labels.push_back(std::to_string(r));
    }
    max_groups = std::max(max_groups, groups[h].num_groups());
    panels.push_back(std::move(p));
  }
  std::vector<figures::LegendEntry> legend;
  for (int64_t g = 0; g < max_groups; ++g)
    legend.push_back({g == 0 ? "group 0 (bulk)" : fmt::format("group {}", g), static_cast<int>(g)});
  const int columns = static_cast<int>(std::min<size_t>(4, panels.size()));
  return figures::bar_grid_svg(
      fmt::format("{} layer {}: contribution scores, sorted ascending", model_name, layer.layer),
      panels, columns, legend, "dimension (sorted by contribution)", "contribution score");
}

std::string activation_profile_svg(const AnalysisResult& r) {
  const std::vector<std::string> names{"Top-1", "Top-2", "Top-3", "Median"};
  figures::LinePanel panel;
  panel.title = "residual stream after each layer";
  panel.x_label = "layer (zero-based)";
  panel.y_label = "max |activation| per dimension";
  panel.series.resize(names.size());
  for (size_t s = 0; s < names.size(); ++s) panel.series[s].name = names[s];
  for (const auto& l : r.layers) {
    if (l.activation.max_abs.empty()) continue;
    for (size_t s = 0; s < names.size(); ++s) {
      const bool top = s < 3;
      if (top && s >= l.activation.top_values.size()) continue;
      panel.series[s].x.push_back(static_cast<double>(l.layer));
      panel.series[s].y.push_back(top ? l.activation.top_values[s] : l.activation.median);
    }
  }
  check(!panel.series[3].x.empty(), "figures", "no layer has an activation profile");
  return figures::line_panels_svg(fmt::format("{}: layer-wise activation profile", r.model),
                                  {panel});
}

std::string top_share_heatmap_svg(const AnalysisResult& r) {
  check(!r.layers.empty(), "figures", "no layers to plot");
  figures::Heatmap m;
  m.title = fmt::format("{}: top-{} contribution share", r.model, r.top_k);
  m.x_label = "query head";
  m.y_label = "layer";
  m.percent = true;
  m.lo = 0.0;
  m.hi = 1.0;
  for (int64_t h = 0; h < r.num_heads; ++h) m.col_labels.push_back(std::to_string(h));
  for (const auto& l : r.layers) {
    m.row_labels.push_back(std::to_string(l.layer));
    std::vector<double> row;
    for (const auto& h : l.heads) row.push_back(h.top_share);
    m.values.push_back(std::move(row));
  }
  return figures::heatmap_svg(m);
}

}  // namespace oal::analysis
