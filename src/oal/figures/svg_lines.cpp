#include "oal/figures/svg_lines.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "oal/core/error.h"
#include "oal/figures/svg_canvas.h"

namespace oal::figures {
namespace {

constexpr double k_panel_w = 380, k_panel_h = 300;
constexpr double k_left = 62, k_right = 14, k_top = 34, k_bottom = 46;

struct Axis {
  bool log = false;
  double lo = 0, hi = 1;  // in axis units (log10 / log2 when log)
  double base = 10;
  double to_unit(double v) const { return log ? std::log(v) / std::log(base) : v; }
};

bool plottable(double v, bool log) {
  return std::isfinite(v) && (!log || v > 0);
}

Axis make_axis(const LinePanel& p, bool is_x) {
  Axis a;
  a.log = is_x ? p.log_x : p.log_y;
  a.base = is_x ? 2 : 10;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& s : p.series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!plottable(s.x[i], p.log_x) || !plottable(s.y[i], p.log_y)) continue;
      const double u = a.to_unit(is_x ? s.x[i] : s.y[i]);
      lo = std::min(lo, u);
      hi = std::max(hi, u);
    }
  check(std::isfinite(lo), "svg lines", "panel '{}' has no plottable point", p.title);
  if (a.log) {
    lo = std::floor(lo);
    hi = std::ceil(hi);
    if (hi <= lo) hi = lo + 1;
  } else {
    if (!is_x) lo = std::min(lo, 0.0);
    if (hi <= lo) hi = lo + 1;
    const double pad = 0.05 * (hi - lo);
    hi += pad;
    if (lo < 0) lo -= pad;
  }
  a.lo = lo;
  a.hi = hi;
  return a;
}

std::vector<double> ticks(const Axis& a) {
  std::vector<double> t;
  if (a.log) {
    const double step = std::max(1.0, std::ceil((a.hi - a.lo) / 8));
    for (double u = a.lo; u <= a.hi + 1e-9; u += step) t.push_back(u);
  } else {
    const double raw = (a.hi - a.lo) / 5;
    const double mag = std::pow(10, std::floor(std::log10(raw)));
    const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
    for (double u = std::ceil(a.lo / step) * step; u <= a.hi + 1e-9; u += step) t.push_back(u);
  }
  return t;
}

std::string tick_label(const Axis& a, double u) {
  if (!a.log) return format_number(u);
  if (a.base == 2) {
    const double v = std::pow(2.0, u);
    return v >= 1024 ? format_number(v / 1024) + "K" : format_number(v);
  }
  return format_number(std::pow(10.0, u));
}

void draw_panel(SvgCanvas& c, const LinePanel& p, double x0, double y0,
                const std::vector<std::string>& names) {
  const Axis ax = make_axis(p, true), ay = make_axis(p, false);
  const double pw = k_panel_w - k_left - k_right, ph = k_panel_h - k_top - k_bottom;
  const double left = x0 + k_left, top = y0 + k_top;
  auto px = [&](double v) { return left + (ax.to_unit(v) - ax.lo) / (ax.hi - ax.lo) * pw; };
  auto py = [&](double v) { return top + ph - (ay.to_unit(v) - ay.lo) / (ay.hi - ay.lo) * ph; };
  c.text(left + pw / 2, y0 + 20, p.title, 13, "middle", 0, true);
  for (double u : ticks(ay)) {
    const double y = top + ph - (u - ay.lo) / (ay.hi - ay.lo) * ph;
    c.line(left, y, left + pw, y, "#e0e0e0", 0.7);
    c.text(left - 5, y + 4, tick_label(ay, u), 10, "end");
  }
  for (double u : ticks(ax)) {
    const double x = left + (u - ax.lo) / (ax.hi - ax.lo) * pw;
    c.line(x, top, x, top + ph, "#eeeeee", 0.7);
    c.text(x, top + ph + 15, tick_label(ax, u), 10, "middle");
  }
  c.line(left, top + ph, left + pw, top + ph, "#000", 1);
  c.line(left, top, left, top + ph, "#000", 1);
  c.text(left + pw / 2, top + ph + 34, p.x_label, 11, "middle");
  c.text(x0 + 14, top + ph / 2, p.y_label, 11, "middle", -90);
  for (const auto& s : p.series) {
    const int color =
        static_cast<int>(std::find(names.begin(), names.end(), s.name) - names.begin());
    std::string pts;
    auto flush = [&] {
      if (pts.find(' ') != std::string::npos) c.polyline(pts, palette_color(color), 1.8);
      pts.clear();
    };
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!plottable(s.x[i], p.log_x) || !plottable(s.y[i], p.log_y)) {
        flush();
        continue;
      }
      const double x = px(s.x[i]), y = py(s.y[i]);
      pts += fmt::format("{}{:.2f},{:.2f}", pts.empty() ? "" : " ", x, y);
      c.circle(x, y, 2.6, palette_color(color));
    }
    flush();
  }
}

}  // namespace

std::string line_panels_svg(const std::string& title, const std::vector<LinePanel>& panels) {
  check(!panels.empty(), "svg lines", "expected at least one panel");
  std::vector<std::string> names;
  for (const auto& p : panels)
    for (const auto& s : p.series) {
      check(s.x.size() == s.y.size(), "svg lines", "series '{}': {} x values, {} y values", s.name,
            s.x.size(), s.y.size());
      if (std::find(names.begin(), names.end(), s.name) == names.end()) names.push_back(s.name);
    }
  const int per_row = 4;
  const int legend_rows = static_cast<int>((names.size() + per_row - 1) / per_row);
  const double width = k_panel_w * static_cast<double>(panels.size());
  const double height = 30 + k_panel_h + 20 * legend_rows + 10;
  SvgCanvas c(width, height);
  c.rect(0, 0, width, height, "#ffffff");
  c.text(width / 2, 20, title, 14, "middle", 0, true);
  for (size_t i = 0; i < panels.size(); ++i)
    draw_panel(c, panels[i], k_panel_w * static_cast<double>(i), 30, names);
  for (size_t i = 0; i < names.size(); ++i) {
    const double x = 20 + static_cast<double>(i % per_row) * (width - 40) / per_row;
    const double y = 30 + k_panel_h + 14 + 20 * static_cast<double>(i / per_row);
    c.line(x, y - 4, x + 22, y - 4, palette_color(static_cast<int>(i)), 2.5);
    c.text(x + 28, y, names[i], 11);
  }
  return c.str();
}

}  // namespace oal::figures
