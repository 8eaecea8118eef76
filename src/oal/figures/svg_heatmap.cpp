#include "oal/figures/svg_heatmap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "oal/core/error.h"
#include "oal/figures/svg_canvas.h"

namespace oal::figures {
namespace {

// Linear white (t = 0) → #08306b (t = 1).
std::string scale_color(double t) {
  t = std::clamp(t, 0.0, 1.0);
  auto mix = [&](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * t)); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(255, 8), mix(255, 48), mix(255, 107));
}

std::string label_of(double v, bool percent) {
  return percent ? fmt::format("{:.0f}", 100.0 * v) : format_number(v);
}

}  // namespace

std::string heatmap_svg(const Heatmap& m) {
  constexpr const char* op = "svg heatmap";
  check(!m.values.empty() && !m.values[0].empty(), op, "expected a non-empty matrix");
  const size_t rows = m.values.size(), cols = m.values[0].size();
  for (const auto& r : m.values) {
    check(r.size() == cols, op, "ragged matrix: a row has {} values, expected {}", r.size(), cols);
    for (double v : r) check(std::isfinite(v), op, "non-finite value");
  }
  check(m.row_labels.size() == rows && m.col_labels.size() == cols, op,
        "{} row labels and {} column labels for a {}x{} matrix", m.row_labels.size(),
        m.col_labels.size(), rows, cols);
  check(m.lo < m.hi, op, "colour range [{}, {}]: expected lo < hi", m.lo, m.hi);
  const double cell = std::clamp(480.0 / static_cast<double>(std::max(rows, cols)), 10.0, 40.0);
  const double left = 70, top = 40, bar_w = 14;
  const double width = left + cols * cell + 80, height = top + rows * cell + 50;
  SvgCanvas c(width, height);
  c.text(width / 2, 20, m.title, 14, "middle", 0, true);
  const bool show_values = cell >= 22;
  for (size_t r = 0; r < rows; ++r) {
    c.text(left - 6, top + (r + 0.65) * cell, m.row_labels[r], 10, "end");
    for (size_t k = 0; k < cols; ++k) {
      const double v = m.values[r][k], t = (v - m.lo) / (m.hi - m.lo);
      c.rect(left + k * cell, top + r * cell, cell - 1, cell - 1, scale_color(t),
             fmt::format("{} {}, {} {}: {}", m.y_label, m.row_labels[r], m.x_label, m.col_labels[k],
                         label_of(v, m.percent)));
      if (show_values)
        c.text(left + (k + 0.5) * cell, top + (r + 0.65) * cell, label_of(v, m.percent), 9,
               "middle");
    }
  }
  for (size_t k = 0; k < cols; ++k)
    if (cols <= 32 || k % 4 == 0)
      c.text(left + (k + 0.5) * cell, top + rows * cell + 12, m.col_labels[k], 9, "middle");
  c.text(left + cols * cell / 2, top + rows * cell + 30, m.x_label, 11, "middle");
  c.text(16, top + rows * cell / 2, m.y_label, 11, "middle", -90);
  const double bx = left + cols * cell + 20, bh = rows * cell;
  for (int i = 0; i < 20; ++i)
    c.rect(bx, top + bh * (19 - i) / 20.0, bar_w, bh / 20.0 + 0.5, scale_color((i + 0.5) / 20.0));
  c.text(bx + bar_w + 4, top + 8, label_of(m.hi, m.percent), 9);
  c.text(bx + bar_w + 4, top + bh, label_of(m.lo, m.percent), 9);
  return c.str();
}

}  // namespace oal::figures
