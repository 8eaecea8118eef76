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
  for (const auto& l : s.layers) {
    nlohmann::json j = {{"layer", l.layer}, {"mass_beyond_window", l.mean()}, {"heads", l.heads}};
    if (!l.retrieval.empty()) j["retrieval"] = l.retrieval;
    layers.push_back(std::move(j));
  }
  return {{"format", "oal-layer-scores"},
          {"version", 1},
          {"sinks", s.window.sinks},
          {"window", s.window.recent},
          {"ctx", s.ctx},
          {"sequences", s.sequences},
          {"layers", layers}};
}

namespace {

// Per-head masses in [0, 1] under `field` of layer `l`.
std::vector<double> read_masses(const nlohmann::json& l, const char* field, int64_t layer,
                                const std::string& where) {
  check(l[field].is_array() && !l[field].empty(), k_op,
        "{}: layer {}: '{}' must be a non-empty array", where, layer, field);
  std::vector<double> out;
  for (const auto& h : l[field]) {
    check(h.is_number() && std::isfinite(h.get<double>()) && h.get<double>() >= 0 &&
              h.get<double>() <= 1,
          k_op, "{}: layer {}: {} masses must be numbers in [0, 1]", where, layer, field);
    out.push_back(h.get<double>());
  }
  return out;
}

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
    LayerScore ls{io::json_int(l["layer"], k_op, where + ": layers[].layer"), {}, {}};
    ls.heads = read_masses(l, "heads", ls.layer, where);
    if (l.contains("retrieval")) {
      ls.retrieval = read_masses(l, "retrieval", ls.layer, where);
      check(ls.retrieval.size() == ls.heads.size(), k_op,
            "{}: layer {}: {} retrieval masses for {} heads", where, ls.layer,
            ls.retrieval.size(), ls.heads.size());
    }
    check(s.layers.empty() || ls.retrieval.empty() == s.layers.back().retrieval.empty(), k_op,
          "{}: layer {}: retrieval masses must be given for every layer or for none", where,
          ls.layer);
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

std::map<int64_t, attn::FullHeads> most_retrieving_kv_heads(const LayerScores& s, int64_t count,
                                                           const std::vector<int64_t>& layers,
                                                           int64_t kv_heads) {
  struct Candidate {
    double score;
    int64_t layer, head;
  };
  std::vector<Candidate> all;
  for (int64_t layer : layers) {
    const auto it = std::find_if(s.layers.begin(), s.layers.end(),
                                 [&](const LayerScore& l) { return l.layer == layer; });
    check(it != s.layers.end(), k_op, "layer {} is not scored", layer);
    check(!it->retrieval.empty(), k_op,
          "no retrieval scores: run `oal layer-scores --retrieval-probes N --out FILE`");
    const int64_t hq = int64_t(it->retrieval.size());
    check(kv_heads >= 1 && hq % kv_heads == 0, k_op,
          "layer {}: {} query heads do not group over {} KV heads", layer, hq, kv_heads);
    const int64_t g = hq / kv_heads;
    for (int64_t h = 0; h < kv_heads; ++h)
      all.push_back({*std::max_element(it->retrieval.begin() + h * g,
                                       it->retrieval.begin() + (h + 1) * g),
                     layer, h});
  }
  check(count >= 1 && count <= int64_t(all.size()), k_op,
        "expected 1 to {} kept KV heads ({} per layer over {} layers), got {}", all.size(),
        kv_heads, layers.size(), count);
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.layer != b.layer ? a.layer < b.layer : a.head < b.head;
  });
  std::map<int64_t, attn::FullHeads> out;
  for (int64_t i = 0; i < count; ++i) out[all[i].layer].kv.push_back(all[i].head);
  for (auto& [layer, heads] : out) std::sort(heads.kv.begin(), heads.kv.end());
  return out;
}

}  // namespace oal::analysis
