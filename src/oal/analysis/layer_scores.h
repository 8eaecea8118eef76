#pragma once
// Per-layer scores for choosing which layers to convert (`oal convert --layers auto:K`):
// the softmax weight each query head puts beyond its sinks and recent window
// (attention/windowed/window_mass.h), as `oal layer-scores` writes them.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "oal/attention/windowed/window.h"

namespace oal::analysis {

struct LayerScore {
  int64_t layer = 0;
  std::vector<double> heads;  // mass beyond the window per query head, in [0, 1]
  double mean() const;        // over heads
};

struct LayerScores {
  attn::Window window;
  int64_t ctx = 0, sequences = 0;
  std::vector<LayerScore> layers;  // ascending layer index
};

// {"format": "oal-layer-scores", "version": 1, "sinks", "window", "ctx", "sequences",
//  "layers": [{"layer", "mass_beyond_window", "heads": [...]}]}; reading checks every
// field (oal::Error("layer_scores") naming the file and field).
nlohmann::json layer_scores_to_json(const LayerScores& s);
LayerScores read_layer_scores(const std::filesystem::path& path);

// The `count` layers with the least mass beyond the window (ties: lower layer first),
// ascending. Throws oal::Error("layer_scores") unless 1 <= count <= scored layers.
std::vector<int64_t> least_window_mass_layers(const LayerScores& s, int64_t count);

}  // namespace oal::analysis
