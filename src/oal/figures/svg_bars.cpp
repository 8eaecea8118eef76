#include "oal/figures/svg_bars.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "oal/core/error.h"
#include "oal/figures/svg_canvas.h"

namespace oal::figures {
namespace {

constexpr double k_panel_w = 260, k_panel_h = 170, k_margin_l = 48, k_margin_b = 28,
                 k_margin_t = 22, k_title_h = 34, k_legend_h = 24;

void check_panel(const BarPanel& p, size_t index) {
  check(!p.values.empty(), "svg bars", "panel {} has no bars", index);
  check(p.colors.empty() || p.colors.size() == p.values.size(), "svg bars",
        "panel {}: {} colours for {} bars", index, p.colors.size(), p.values.size());
  check(p.bar_labels.empty() || p.bar_labels.size() == p.values.size(), "svg bars",
        "panel {}: {} labels for {} bars", index, p.bar_labels.size(), p.values.size());
  for (double v : p.values) check(std::isfinite(v), "svg bars", "panel {}: non-finite bar", index);
}

void draw_panel(SvgCanvas& c, const BarPanel& p, double x0, double y0, const std::string& x_label,
                const std::string& y_label) {
  const double w = k_panel_w - k_margin_l - 8, h = k_panel_h - k_margin_t - k_margin_b;
  const double px = x0 + k_margin_l, py = y0 + k_margin_t;
  double lo = std::min(0.0, *std::min_element(p.values.begin(), p.values.end()));
  double hi = std::max(0.0, *std::max_element(p.values.begin(), p.values.end()));
  if (hi == lo) hi = lo + 1.0;
  auto y_of = [&](double v) { return py + h * (hi - v) / (hi - lo); };
  c.text(x0 + k_panel_w / 2, y0 + 14, p.title, 11, "middle", 0, true);
  c.line(px, py, px, py + h, "#444");
  c.line(px, y_of(0), px + w, y_of(0), "#444");
  c.text(px - 4, py + 4, format_number(hi), 9, "end");
  c.text(px - 4, py + h, format_number(lo), 9, "end");
  const double bw = w / static_cast<double>(p.values.size());
  for (size_t i = 0; i < p.values.size(); ++i) {
    const int ci = p.colors.empty() ? 0 : p.colors[i];
    const std::string_view fill = ci < 0 ? k_grey : palette_color(ci);
    const double top = y_of(std::max(p.values[i], 0.0)), bottom = y_of(std::min(p.values[i], 0.0));
    const std::string label = p.bar_labels.empty() ? std::to_string(i) : p.bar_labels[i];
    c.rect(px + i * bw + bw * 0.1, top, bw * 0.8, bottom - top, fill,
           fmt::format("{}: {}", label, format_number(p.values[i])));
    if (!p.bar_labels.empty() && (p.values.size() <= 16 || i % (p.values.size() / 8) == 0))
      c.text(px + (i + 0.5) * bw, py + h + 11, p.bar_labels[i], 8, "middle");
  }
  c.text(px + w / 2, y0 + k_panel_h - 4, x_label, 9, "middle");
  c.text(x0 + 10, py + h / 2, y_label, 9, "middle", -90);
}

}  // namespace

std::string bar_grid_svg(const std::string& title, const std::vector<BarPanel>& panels, int columns,
                         const std::vector<LegendEntry>& legend, const std::string& x_label,
                         const std::string& y_label) {
  check(!panels.empty(), "svg bars", "expected at least one panel");
  check(columns >= 1, "svg bars", "columns {}: expected >= 1", columns);
  for (size_t i = 0; i < panels.size(); ++i) check_panel(panels[i], i);
  const int cols = std::min<int>(columns, static_cast<int>(panels.size()));
  const int rows = (static_cast<int>(panels.size()) + cols - 1) / cols;
  const double width = cols * k_panel_w + 10;
  SvgCanvas c(width, k_title_h + k_legend_h + rows * k_panel_h + 6);
  c.text(width / 2, 20, title, 14, "middle", 0, true);
  double lx = 12;
  for (const auto& e : legend) {
    c.rect(lx, k_title_h - 4, 12, 12, palette_color(e.color));
    c.text(lx + 16, k_title_h + 6, e.label, 10);
    lx += 24 + 6.5 * static_cast<double>(e.label.size());
  }
  for (size_t i = 0; i < panels.size(); ++i)
    draw_panel(c, panels[i], static_cast<double>(i % cols) * k_panel_w,
               k_title_h + k_legend_h + static_cast<double>(i / cols) * k_panel_h, x_label,
               y_label);
  return c.str();
}

}  // namespace oal::figures
