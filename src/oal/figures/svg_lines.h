#pragma once
// Line plots as SVG (Fig. 3 style): one or more panels side by side, each with several
// named series, linear or log axes, markers at the data points and a shared legend.
// Used by `oal bench` (runtime / memory against sequence length) and any other line
// chart; rendering goes through SvgCanvas so the output is byte-stable.
#include <string>
#include <vector>

namespace oal::figures {

struct LineSeries {
  std::string name;       // legend label; series with equal names share a colour
  std::vector<double> x;  // same length as y; non-finite or (on log axes) <= 0 points
  std::vector<double> y;  // are left out, breaking the line there
};

struct LinePanel {
  std::string title;
  std::string x_label, y_label;
  bool log_x = false, log_y = false;  // log axes use decade (or base-2 for x) ticks
  std::vector<LineSeries> series;
};

// `panels` side by side, legend (series names in first-seen order) below. Throws
// oal::Error("[svg lines] ...") for no panels, x/y length mismatches or a panel with no
// plottable point.
std::string line_panels_svg(const std::string& title, const std::vector<LinePanel>& panels);

}  // namespace oal::figures
