#include "oal/analysis/layer_scores.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "oal/core/error.h"
#include "oal/io/json_file.h"

namespace oal::analysis {
namespace {

constexpr std::string_view k_op = "layer_scores";

}  // namespace

double LayerScore::mean() const {
  return heads.empty() ? 0.0
                       : std::accumulate(heads.begin(), heads.end(), 0.0) / double(heads.size());
}

nlohmann::json layer_scores_to_json(const LayerScores& s) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : s.layers)
    layers.push_back({{"layer", l.layer}, {"mass_beyond_window", l.mean()}, {"heads", l.heads}});
  return {{"format", "oal-layer-scores"},
          {"version", 1},
          {"sinks", s.window.sinks},
          {"window", s.window.recent},
          {"ctx", s.ctx},
          {"sequences", s.sequences},
          {"layers", layers}};
}

namespace {

LayerScores parse_layer_scores(const nlohmann::json& j, const std::string& where) {
  check(j.is_object() && j.contains("format") && j["format"].is_string() &&
            j["format"].get<std::string>() == "oal-layer-scores" &&
            io::json_int_or(j, "version", 0, k_op, where + ": version") == 1,
        k_op, "{}: expected format oal-layer-scores version 1", where);
  LayerScores s;
  s.window = {io::json_int_or(j, "sinks", 0, k_op, where + ": sinks"),
              io::json_int_or(j, "window", 0, k_op, where + ": window")};
  s.window.validate(k_op);
  s.ctx = io::json_int_or(j, "ctx", 0, k_op, where + ": ctx");
  s.sequences = io::json_int_or(j, "sequences", 0, k_op, where + ": sequences");
  check(j.contains("layers") && j["layers"].is_array() && !j["layers"].empty(), k_op,
        "{}: expected a non-empty array 'layers'", where);
  for (const auto& l : j["layers"]) {
    check(l.is_object() && l.contains("layer") && l.contains("heads") && l["heads"].is_array() &&
              !l["heads"].empty(),
          k_op, "{}: each layer needs 'layer' and a non-empty array 'heads'", where);
    LayerScore ls{io::json_int(l["layer"], k_op, where + ": layers[].layer"), {}};
    for (const auto& h : l["heads"]) {
      check(h.is_number() && std::isfinite(h.get<double>()) && h.get<double>() >= 0 &&
                h.get<double>() <= 1,
            k_op, "{}: layer {}: head masses must be numbers in [0, 1]", where, ls.layer);
      ls.heads.push_back(h.get<double>());
    }
    check(s.layers.empty() || ls.layer > s.layers.back().layer, k_op,
          "{}: layers must be listed once each, in ascending order (layer {})", where, ls.layer);
    check(ls.layer >= 0, k_op, "{}: layer {} is negative", where, ls.layer);
    s.layers.push_back(std::move(ls));
  }
  return s;
}

}  // namespace

LayerScores read_layer_scores(const std::filesystem::path& path) {
  const nlohmann::json j =
      io::read_json_file(path, k_op, "a layer-scores file from `oal layer-scores`");
  try {
    return parse_layer_scores(j, path.string());
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
    fail(k_op, "{}: a field is missing or of the wrong type ({})", path.string(), e.what());
  }
}

std::vector<int64_t> least_window_mass_layers(const LayerScores& s, int64_t count) {
  check(count >= 1 && count <= int64_t(s.layers.size()), k_op,
        "auto:{}: expected 1 to {} layers (the scored ones)", count, s.layers.size());
  std::vector<const LayerScore*> order;
  for (const auto& l : s.layers) order.push_back(&l);
  std::stable_sort(order.begin(), order.end(),
                   [](const LayerScore* a, const LayerScore* b) { return a->mean() < b->mean(); });
  std::vector<int64_t> out;
  for (int64_t i = 0; i < count; ++i) out.push_back(order[i]->layer);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace oal::analysis
