#include "oal/analysis/layer_selection.h"

#include <set>

#include "oal/core/error.h"

namespace oal::analysis {

std::vector<int64_t> resolve_layers(const std::vector<int64_t>& requested, int64_t num_layers) {
  if (requested.empty()) {
    std::vector<int64_t> all(static_cast<size_t>(num_layers));
    for (int64_t i = 0; i < num_layers; ++i) all[static_cast<size_t>(i)] = i;
    return all;
  }
  std::set<int64_t> seen;
  for (int64_t l : requested) {
    check(l >= 0 && l < num_layers, "layers", "layer {} does not exist; the model has layers 0..{}",
          l, num_layers - 1);
    check(seen.insert(l).second, "layers", "layer {} is listed twice", l);
  }
  return requested;
}

}  // namespace oal::analysis
