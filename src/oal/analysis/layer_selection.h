#pragma once
// The layers a command or library call works on: the requested indices, or every layer
// when none are requested. One rule for every caller (analysis, calibration, capture):
// each index must exist and may appear once.
#include <cstdint>
#include <vector>

namespace oal::analysis {

// `requested` in the order given, or 0..num_layers-1 when empty. Throws
// oal::Error("[layers] layer 7 does not exist; the model has layers 0..5") for an index
// outside the model and ("... layer 2 is listed twice") for a repeat.
std::vector<int64_t> resolve_layers(const std::vector<int64_t>& requested, int64_t num_layers);

}  // namespace oal::analysis
