#pragma once
// Heat map of a [rows × cols] matrix (e.g. top-5 share over layers × heads) with a
// white → blue colour scale, a colour bar and, for small grids, the values in the cells.
#include <string>
#include <vector>

namespace oal::figures {

struct Heatmap {
  std::string title, x_label, y_label;
  std::vector<std::vector<double>> values;          // [rows][cols], finite
  std::vector<std::string> row_labels, col_labels;  // sizes rows and cols
  double lo = 0.0, hi = 1.0;                        // colour-scale range (lo < hi)
  bool percent = false;                             // label values as percentages
};

// Throws oal::Error("[svg heatmap] ...") for an empty or ragged matrix, label-count
// mismatch, non-finite values or lo >= hi.
std::string heatmap_svg(const Heatmap& map);

}  // namespace oal::figures
