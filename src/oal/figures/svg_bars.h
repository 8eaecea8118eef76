#pragma once
// Small-multiple bar charts (one panel per head): each bar coloured by a category index
// (e.g. its group), with a shared legend. Used for contribution profiles (Fig. 1c/2a).
#include <string>
#include <vector>

namespace oal::figures {

struct BarPanel {
  std::string title;
  std::vector<double> values;           // bar heights (may be negative)
  std::vector<int> colors;              // palette index per bar; -1 → grey; empty → all 0
  std::vector<std::string> bar_labels;  // tick label per bar (optional, same length)
};

struct LegendEntry {
  std::string label;
  int color = 0;  // palette index
};

// `columns` panels per row (>= 1). Throws oal::Error("[svg bars] ...") for no panels, an
// empty panel, mismatched colour/label lengths or non-finite values.
std::string bar_grid_svg(const std::string& title, const std::vector<BarPanel>& panels, int columns,
                         const std::vector<LegendEntry>& legend, const std::string& x_label,
                         const std::string& y_label);

}  // namespace oal::figures
