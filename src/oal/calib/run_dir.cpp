#include "oal/calib/run_dir.h"

#include "oal/core/error.h"

namespace oal::calib {
namespace fs = std::filesystem;

nlohmann::json reports_json(const std::vector<FitReport>& reports) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : reports)
    a.push_back({{"method", r.method}, {"init", r.init}, {"layer", r.layer}, {"head", r.head},
                 {"initial_val_mse", r.initial_val}, {"best_val_mse", r.best_val},
                 {"best_update", r.best_update}, {"updates", r.updates}, {"selected", r.selected}});
  return a;
}

Shard parse_shard(const std::string& spec) {
  Shard s;
  const auto slash = spec.find('/');
  try {
    check(slash != std::string::npos, "calibrate", "");
    size_t a = 0, b = 0;
    s.index = std::stoll(spec.substr(0, slash), &a);
    s.count = std::stoll(spec.substr(slash + 1), &b);
    check(a == slash && b == spec.size() - slash - 1, "calibrate", "");
  } catch (const std::exception&) {
    fail("calibrate", "--shard '{}': expected i/n, e.g. 0/4", spec);
  }
  check(s.count >= 1 && s.index >= 0 && s.index < s.count, "calibrate",
        "--shard '{}': expected 0 <= i < n", spec);
  return s;
}

void write_run(const fs::path& dir, const CalibrationResult& result,
               const CalibrationOptions& options, const RunInfo& info) {
  attn::MethodStore store;
  store.methods = options.methods;
  store.seed = options.seed;
  store.window = options.window;
  store.layers = result.layers;
  store.kernels = result.kernels;
  nlohmann::json& j = store.meta;
  j["model"] = info.model;
  if (!info.fingerprint.empty()) j["model_fingerprint"] = info.fingerprint;
  j["text"] = info.text;
  j["ctx"] = info.ctx;
  j["split"] = {{"train", info.split.train}, {"val", info.split.val}, {"eval", info.split.eval}};
  j["fit"] = {{"lr", options.fit.lr},           {"clip", options.fit.clip},
              {"positions", options.fit.positions}, {"max_updates", options.fit.max_updates},
              {"val_every", options.fit.val_every}, {"patience", options.fit.patience},
              {"perturb_sigma", options.perturb_sigma}};
  j["fits"] = reports_json(result.reports);
  if (info.shard)
    j["shard"] = {{"index", info.shard->index}, {"count", info.shard->count},
                  {"layers", info.shard->layers}};
  attn::write_method_store(dir, store);
}

}  // namespace oal::calib
