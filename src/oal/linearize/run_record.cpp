#include "oal/linearize/run_record.h"

#include "oal/analysis/chi_statistic.h"
#include "oal/core/error.h"

namespace oal::linearize {

nlohmann::json run_record(const Splits& splits, const PipelineOptions& o, int64_t stream_tokens) {
  const auto& g = o.grouping;
  const auto& c = o.calibration;
  return {
      {"format", "oal-linearize"},
      {"version", 1},
      {"model_fingerprint", o.fingerprint},
      {"text", o.text_name},
      {"text_tokens", stream_tokens},
      {"ctx", splits.ctx},
      {"split",
       {{"train", splits.blocks.train}, {"val", splits.blocks.val}, {"eval", splits.blocks.eval}}},
      {"grouping_prompts", splits.grouping_source},
      {"layers", o.layers},
      {"prompts", o.prompts},
      {"grouping",
       {{"chi", analysis::chi_statistic_name(g.chi)},
        {"alpha", g.alpha},
        {"tau", g.tau},
        {"gamma", g.gamma},
        {"g_min", g.g_min},
        {"bootstrap", g.bootstrap},
        {"seed", g.seed},
        {"eps", g.eps}}},
      {"calibration",
       {{"methods", c.methods},
        {"seed", c.seed},
        {"perturb_sigma", c.perturb_sigma},
        {"lr", c.fit.lr},
        {"clip", c.fit.clip},
        {"positions", c.fit.positions},
        {"max_updates", c.fit.max_updates},
        {"val_every", c.fit.val_every},
        {"patience", c.fit.patience}}},
  };
}

namespace {

// The first key (dotted path) whose values differ, or "" when the two are equal.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b,
                             const std::string& at) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, value] : b.items()) {
      const std::string path = at.empty() ? key : at + "." + key;
      if (!a.contains(key)) return path;
      const std::string d = first_difference(a.at(key), value, path);
      if (!d.empty()) return d;
    }
    for (const auto& [key, value] : a.items())
      if (!b.contains(key)) return at.empty() ? key : at + "." + key;
    return "";
  }
  return a == b ? "" : at;
}

nlohmann::json value_at(const nlohmann::json& j, const std::string& dotted) {
  const nlohmann::json* p = &j;
  size_t start = 0;
  while (start <= dotted.size()) {
    const size_t dot = dotted.find('.', start);
    const std::string key =
        dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!p->is_object() || !p->contains(key)) return nullptr;
    p = &p->at(key);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return *p;
}

}  // namespace

void check_same_record(const nlohmann::json& stored, const nlohmann::json& current,
                       const std::filesystem::path& dir) {
  const std::string d = first_difference(stored, current, "");
  check(d.empty(), "linearize",
        "--resume: {} was started with other settings: '{}' is {} there and {} now; resume "
        "with the same options, or write to a new --out",
        dir.string(), d, value_at(stored, d).dump(), value_at(current, d).dump());
}

}  // namespace oal::linearize
