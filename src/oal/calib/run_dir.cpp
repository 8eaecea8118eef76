#include "oal/io/json_file.h"
#include "oal/calib/run_dir.h"

#include <fmt/format.h>

#include <fstream>

#include "oal/attention/feature_method.h"
#include "oal/attention/registry.h"
#include "oal/core/error.h"
#include "oal/io/atomic_file.h"
#include "oal/io/safetensors.h"

namespace oal::calib {
namespace {

constexpr std::string_view k_op = "calibration_run";
namespace fs = std::filesystem;

}  // namespace

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
  std::error_code ec;
  fs::create_directories(dir, ec);
  check(!ec && fs::is_directory(dir), k_op, "cannot create directory {}: {}", dir.string(),
        ec.message());
  nlohmann::json j;
  j["format"] = "oal-calibration";
  j["version"] = 1;
  j["model"] = info.model;
  if (!info.fingerprint.empty()) j["model_fingerprint"] = info.fingerprint;
  j["text"] = info.text;
  j["ctx"] = info.ctx;
  j["seed"] = options.seed;
  j["methods"] = options.methods;
  j["split"] = {{"train", info.split.train}, {"val", info.split.val}, {"eval", info.split.eval}};
  j["fit"] = {{"lr", options.fit.lr},           {"clip", options.fit.clip},
              {"positions", options.fit.positions}, {"max_updates", options.fit.max_updates},
              {"val_every", options.fit.val_every}, {"patience", options.fit.patience},
              {"perturb_sigma", options.perturb_sigma}};
  std::map<std::string, at::Tensor> tensors;
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& lm : result.layers) {
    nlohmann::json lj{{"layer", lm.layer}};
    for (const auto& [name, m] : lm.methods) {
      if (auto* fm = dynamic_cast<const attn::FeatureMapMethod*>(m.get())) {
        lj["q_heads"] = fm->q_heads();
        lj["kv_heads"] = fm->kv_heads();
        lj["head_dim"] = fm->head_dim();
        for (const auto& [p, t] : fm->state_dict())
          tensors[fmt::format("{}.layers.{}.{}", name, lm.layer, p)] = t.contiguous();
      }
    }
    layers.push_back(lj);
  }
  j["layers"] = layers;
  j["fits"] = reports_json(result.reports);
  if (info.shard)
    j["shard"] = {{"index", info.shard->index}, {"count", info.shard->count},
                  {"layers", info.shard->layers}};
  for (const auto& [name, k] : result.kernels)
    if (!k.layers.empty()) attn::write_kernels(dir / ("kernels-" + name + ".json"), k);
  if (!tensors.empty()) io::write_safetensors(dir / "baselines.safetensors", tensors);
  io::write_file_atomic(dir / "calibration.json", j.dump(2) + "\n");
}

namespace {

// The run described by calibration.json `j` (already checked to be an object of the
// right format) with the files beside it in `dir`.
LoadedRun read_run_json(const fs::path& dir, const nlohmann::json& j) {
  LoadedRun run;
  run.meta = j;
  run.methods = j.at("methods").get<std::vector<std::string>>();
  const uint64_t seed = io::json_uint(j.at("seed"), k_op, "calibration.json: 'seed'");
  // The quadratic-kernel methods' fitted kernels (kernels-<name>.json), by name.
  std::map<std::string, attn::ModelKernels> kernels;
  for (const auto& m : run.methods)
    if (attn::method_spec(m).kind == attn::MethodKind::quadratic)
      kernels[m] = attn::read_kernels(dir / ("kernels-" + m + ".json"));
  io::SafetensorsFile st;
  const fs::path sp = dir / "baselines.safetensors";
  if (fs::exists(sp)) st = io::read_safetensors(sp);
  for (const auto& lj : j.at("layers")) {
    LayerMethods lm;
    lm.layer = io::json_int(lj.at("layer"), k_op, "calibration.json: layers[].layer");
    auto size = [&](const char* key) {  // written when the run has a feature-map baseline
      return io::json_int_or(lj, key, 0, k_op, fmt::format("calibration.json: layers[].{}", key));
    };
    for (const auto& name : run.methods) {
      const auto found = kernels.find(name);
      const attn::ModelKernels* k = found == kernels.end() ? nullptr : &found->second;
      attn::MethodShape shape{lm.layer, size("q_heads"), size("kv_heads"), size("head_dim")};
      if (k) {
        const auto& ks = k->layer(lm.layer);
        shape.q_heads = int64_t(ks.size());
        shape.kv_heads = shape.kv_heads ? shape.kv_heads : 1;
        shape.head_dim = ks.at(0).dim();
      } else if (attn::method_spec(name).kind == attn::MethodKind::exact) {
        shape = {lm.layer, 1, 1, 1};
      }
      auto m = attn::make_method(name, shape, seed, k);
      if (auto* fm = dynamic_cast<attn::FeatureMapMethod*>(m.get())) {
        attn::TensorMap params;
        const std::string prefix = fmt::format("{}.layers.{}.", name, lm.layer);
        for (const auto& [key, t] : st.tensors)
          if (key.rfind(prefix, 0) == 0) params[key.substr(prefix.size())] = t;
        check(!params.empty(), k_op, "{}: no parameters for {} layer {}", sp.string(), name,
              lm.layer);
        fm->load_state_dict(params);
      }
      lm.methods[name] = m;
    }
    run.layers.push_back(std::move(lm));
  }
  return run;
}

}  // namespace

LoadedRun read_run(const fs::path& dir) {
  const fs::path cj = dir / "calibration.json";
  check(fs::exists(cj), k_op, "{}: no calibration.json (run `oal calibrate` first)", dir.string());
  const nlohmann::json j = io::read_json_file(cj, k_op);
  check(j.is_object(), k_op, "{}: expected a JSON object (format oal-calibration), got {}",
        cj.string(), j.type_name());
  try {
    check(j.value("format", "") == "oal-calibration" &&
              io::json_int_or(j, "version", 0, k_op, "calibration.json: 'version'") == 1,
          k_op,
          "{}: expected format oal-calibration version 1", cj.string());
    return read_run_json(dir, j);
  } catch (const nlohmann::json::exception& e) {
    fail(k_op, "{}: a field is missing or of the wrong type ({})", cj.string(), e.what());
  }
}

}  // namespace oal::calib
