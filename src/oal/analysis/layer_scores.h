#pragma once
// Per-layer scores for choosing which layers to convert (`oal convert --layers auto:K`):
// the softmax weight each query head puts beyond its sinks and recent window
// (attention/windowed/window_mass.h), as `oal layer-scores` writes them.
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "oal/attention/windowed/full_heads.h"
#include "oal/attention/windowed/window.h"

namespace oal::analysis {

struct LayerScore {
  int64_t layer = 0;
  std::vector<double> heads;  // mass beyond the window per query head, in [0, 1]
  // Weight on the retrieved tokens beyond the window per query head, in [0, 1], from
  // passkey answers (calib/layer_scoring.h score_retrieval); empty when not measured.
  std::vector<double> retrieval;
  double mean() const;  // of heads
};

struct LayerScores {
  attn::Window window;
  int64_t ctx = 0, sequences = 0;
  std::vector<LayerScore> layers;  // ascending layer index
};

// {"format": "oal-layer-scores", "version": 1, "sinks", "window", "ctx", "sequences",
//  "layers": [{"layer", "mass_beyond_window", "heads": [...], "retrieval": [...]}]}
// ("retrieval" only where measured, one per head, on every layer or none); reading
// checks every field (oal::Error("layer_scores") naming the file and field).
nlohmann::json layer_scores_to_json(const LayerScores& s);
LayerScores read_layer_scores(const std::filesystem::path& path);

// The `count` layers with the least mass beyond the window (ties: lower layer first),
// ascending. Throws oal::Error("layer_scores") unless 1 <= count <= scored layers.
std::vector<int64_t> least_window_mass_layers(const LayerScores& s, int64_t count);

// The `count` KV heads of `layers` that retrieve most: each KV head scored by the largest
// retrieval mass among its query heads (Hq / kv_heads of them), the highest kept (ties:
// lower layer, then lower head first), as FullHeads per layer (layers without one are
// absent). Throws oal::Error("layer_scores") when the scores have no retrieval masses, a
// layer is not scored, the heads do not group over kv_heads, or count is not in
// [1, kv_heads · layers].
std::map<int64_t, attn::FullHeads> most_retrieving_kv_heads(const LayerScores& s, int64_t count,
                                                           const std::vector<int64_t>& layers,
                                                           int64_t kv_heads);

}  // namespace oal::analysis
