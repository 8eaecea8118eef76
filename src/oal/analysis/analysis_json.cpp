#include "oal/io/json_file.h"
#include "oal/analysis/analysis_json.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "oal/core/error.h"
#include "oal/io/atomic_file.h"

namespace oal::analysis {
namespace {

using nlohmann::json;
constexpr const char* k_op = "analysis json";

// Typed field access with an error naming the field path. Integers go through the
// checked readers (a float where an integer belongs is an error, not a cast).
template <typename T>
T get(const json& j, const char* key, const std::string& where) {
  check(j.is_object() && j.contains(key), k_op, "{}: missing field '{}'", where, key);
  const json& v = j.at(key);
  const std::string field = where + "." + key;
  if constexpr (std::is_same_v<T, int64_t>) {
    return io::json_int(v, k_op, field);
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return io::json_uint(v, k_op, field);
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    return io::json_int_list(v, k_op, field);
  } else {
    try {
      return v.get<T>();
    } catch (const json::exception& e) {
      fail(k_op, "{}: wrong type ({})", field, e.what());
    }
  }
}

std::vector<double> finite_vector(const json& j, const char* key, const std::string& where,
                                  int64_t expect_size) {
  auto v = get<std::vector<double>>(j, key, where);
  check(expect_size < 0 || static_cast<int64_t>(v.size()) == expect_size, k_op,
        "{}.{}: expected {} values, got {}", where, key, expect_size, v.size());
  for (double x : v) check(std::isfinite(x), k_op, "{}.{}: non-finite value", where, key);
  return v;
}

// A non-empty [P][d] array of finite values at j[key].
std::vector<std::vector<double>> matrix(const json& j, const char* key, const std::string& where,
                                        int64_t d) {
  const json& pp = j.contains(key) ? j.at(key) : json();
  check(pp.is_array() && !pp.empty(), k_op, "{}.{}: expected a non-empty [P][d] array", where,
        key);
  std::vector<std::vector<double>> rows;
  for (size_t p = 0; p < pp.size(); ++p) {
    json row{{"row", pp[p]}};
    rows.push_back(finite_vector(row, "row", where + "." + key + "[" + std::to_string(p) + "]", d));
  }
  return rows;
}

json head_to_json(const HeadAnalysis& h) {
  json j{{"head", h.head},
         {"kv_head", h.kv_head},
         {"chi", h.chi},
         {"magnitude", h.magnitude},
         {"order", h.order},
         {"top_dims", h.top_dims},
         {"top_share", h.top_share},
         {"gaussian_top_share", h.gaussian_top_share},
         {"gaussian_real_coords_share", h.gaussian_real_coords_share},
         {"chi_per_prompt", h.chi_per_prompt}};
  if (!h.score.empty()) j["score"] = h.score;
  if (!h.magnitude_per_prompt.empty()) j["magnitude_per_prompt"] = h.magnitude_per_prompt;
  if (!h.chi_heldout.empty())
    j["heldout"] = {{"chi", h.chi_heldout},
                    {"spearman", h.heldout_spearman},
                    {"top_overlap", h.heldout_top_overlap}};
  if (!h.magnitude_heldout.empty()) j["heldout"]["magnitude"] = h.magnitude_heldout;
  if (!h.prefix.empty()) {
    json points = json::array();
    for (const auto& p : h.prefix)
      points.push_back({{"length", p.length},
                        {"normalized_top_percent", p.normalized_top},
                        {"spearman", p.spearman}});
    j["prefix"] = {{"top_dims", h.prefix_top_dims}, {"points", points}};
  }
  return j;
}

HeadAnalysis head_from_json(const json& j, int64_t d, const std::string& where) {
  HeadAnalysis h;
  h.head = get<int64_t>(j, "head", where);
  h.kv_head = get<int64_t>(j, "kv_head", where);
  h.chi = finite_vector(j, "chi", where, d);
  h.magnitude = finite_vector(j, "magnitude", where, d);
  h.order = get<std::vector<int64_t>>(j, "order", where);
  h.top_dims = get<std::vector<int64_t>>(j, "top_dims", where);
  h.top_share = get<double>(j, "top_share", where);
  h.gaussian_top_share = get<double>(j, "gaussian_top_share", where);
  h.gaussian_real_coords_share = get<double>(j, "gaussian_real_coords_share", where);
  h.chi_per_prompt = matrix(j, "chi_per_prompt", where, d);
  if (j.contains("magnitude_per_prompt"))
    h.magnitude_per_prompt = matrix(j, "magnitude_per_prompt", where, d);
  // Files written before --chi existed have no "score": their statistic is the signed χ.
  h.score = j.contains("score") ? finite_vector(j, "score", where, d) : h.chi;
  check(static_cast<int64_t>(h.order.size()) == d, k_op, "{}.order: expected {} entries", where, d);
  if (j.contains("heldout")) {
    const json& ho = j.at("heldout");
    h.chi_heldout = finite_vector(ho, "chi", where + ".heldout", d);
    h.heldout_spearman = get<double>(ho, "spearman", where + ".heldout");
    h.heldout_top_overlap = get<int64_t>(ho, "top_overlap", where + ".heldout");
    if (ho.contains("magnitude"))
      h.magnitude_heldout = finite_vector(ho, "magnitude", where + ".heldout", d);
  }
  if (j.contains("prefix")) {
    const json& pr = j.at("prefix");
    h.prefix_top_dims = get<std::vector<int64_t>>(pr, "top_dims", where + ".prefix");
    for (const json& p : get<json>(pr, "points", where + ".prefix"))
      h.prefix.push_back({get<int64_t>(p, "length", where + ".prefix"),
                          get<std::vector<double>>(p, "normalized_top_percent", where + ".prefix"),
                          get<double>(p, "spearman", where + ".prefix")});
  }
  return h;
}

}  // namespace

json analysis_to_json(const AnalysisResult& r) {
  json layers = json::array();
  for (const auto& l : r.layers) {
    json heads = json::array();
    for (const auto& h : l.heads) heads.push_back(head_to_json(h));
    layers.push_back({{"layer", l.layer},
                      {"activation",
                       {{"max_abs", l.activation.max_abs},
                        {"top_dims", l.activation.top_dims},
                        {"top_values", l.activation.top_values},
                        {"median", l.activation.median}}},
                      {"heads", heads}});
  }
  return {{"format", k_analysis_format},
          {"version", k_analysis_version},
          {"model", r.model},
          {"num_layers", r.num_layers},
          {"num_heads", r.num_heads},
          {"num_kv_heads", r.num_kv_heads},
          {"head_dim", r.head_dim},
          {"hidden_size", r.hidden_size},
          {"top_k", r.top_k},
          {"ctx", r.ctx},
          {"seed", r.seed},
          {"chi_statistic", chi_statistic_name(r.chi)},
          {"top_share_definition",
           chi_is_magnitude(r.chi)
               ? "sum of the top-k score_r over sum of score_r (score = the chi_statistic profile)"
               : "sum of the top-k A_r over sum of A_r, A_r = mean over prompts of the mean over "
                 "causal pairs of |q_ir k_jr| / sqrt(d)"},
          {"calibration_lengths", r.calibration_lengths},
          {"heldout_lengths", r.heldout_lengths},
          {"layers", layers}};
}

AnalysisResult analysis_from_json(const json& j) {
  check(j.is_object() && j.value("format", json()) == k_analysis_format, k_op,
        "expected an object with \"format\": \"{}\"", k_analysis_format);
  const int64_t version = io::json_int_or(j, "version", -1, k_op, "analysis.version");
  check(version == k_analysis_version, k_op, "unsupported version {}; expected {}", version,
        k_analysis_version);
  AnalysisResult r;
  r.model = get<std::string>(j, "model", "analysis");
  r.num_layers = get<int64_t>(j, "num_layers", "analysis");
  r.num_heads = get<int64_t>(j, "num_heads", "analysis");
  r.num_kv_heads = get<int64_t>(j, "num_kv_heads", "analysis");
  r.head_dim = get<int64_t>(j, "head_dim", "analysis");
  r.hidden_size = get<int64_t>(j, "hidden_size", "analysis");
  r.top_k = get<int64_t>(j, "top_k", "analysis");
  r.ctx = get<int64_t>(j, "ctx", "analysis");
  r.seed = get<uint64_t>(j, "seed", "analysis");
  // Files written before --chi existed carry no "chi_statistic": they used the signed χ.
  r.chi = j.contains("chi_statistic")
              ? parse_chi_statistic(get<std::string>(j, "chi_statistic", "analysis"))
              : ChiStatistic::signed_mean;
  r.calibration_lengths = get<std::vector<int64_t>>(j, "calibration_lengths", "analysis");
  r.heldout_lengths = get<std::vector<int64_t>>(j, "heldout_lengths", "analysis");
  check(r.head_dim >= 1 && r.num_heads >= 1, k_op, "head_dim {} and num_heads {} must be >= 1",
        r.head_dim, r.num_heads);
  const json layers = get<json>(j, "layers", "analysis");
  check(layers.is_array() && !layers.empty(), k_op, "expected a non-empty \"layers\" array");
  for (const json& lj : layers) {
    LayerAnalysis l;
    l.layer = get<int64_t>(lj, "layer", "layers[]");
    const std::string where = "layers[" + std::to_string(l.layer) + "]";
    const json a = get<json>(lj, "activation", where);
    l.activation.max_abs = get<std::vector<double>>(a, "max_abs", where + ".activation");
    l.activation.top_dims = get<std::vector<int64_t>>(a, "top_dims", where + ".activation");
    l.activation.top_values = get<std::vector<double>>(a, "top_values", where + ".activation");
    l.activation.median = get<double>(a, "median", where + ".activation");
    const json heads = get<json>(lj, "heads", where);
    check(heads.is_array() && static_cast<int64_t>(heads.size()) == r.num_heads, k_op,
          "{}.heads: expected {} heads", where, r.num_heads);
    for (size_t h = 0; h < heads.size(); ++h)
      l.heads.push_back(
          head_from_json(heads[h], r.head_dim, where + ".heads[" + std::to_string(h) + "]"));
    r.layers.push_back(std::move(l));
  }
  return r;
}

void write_analysis(const std::filesystem::path& path, const AnalysisResult& result) {
  io::write_file_atomic(path, analysis_to_json(result).dump(1) + "\n");
}

AnalysisResult read_analysis(const std::filesystem::path& path) {
  return analysis_from_json(io::read_json_file(path, k_op, "analysis.json from `oal analyze`"));
}

}  // namespace oal::analysis
