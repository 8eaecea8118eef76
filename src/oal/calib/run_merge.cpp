#include "oal/calib/run_merge.h"

#include <algorithm>
#include <map>
#include <set>

#include "oal/attention/kernel_json.h"
#include "oal/calib/calibrate.h"
#include "oal/core/error.h"
#include "oal/io/atomic_file.h"
#include "oal/io/json_file.h"
#include "oal/io/safetensors.h"

namespace oal::calib {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view k_op = "merge_calibration";

struct Part {
  fs::path dir;
  nlohmann::json meta;
};

// Everything but what differs between shards must be equal.
nlohmann::json run_identity(nlohmann::json j) {
  j["shard_count"] = j.contains("shard") ? j["shard"]["count"] : nlohmann::json();
  for (const char* k : {"layers", "fits", "shard"}) j.erase(k);
  return j;
}

std::vector<Part> read_parts(const std::vector<fs::path>& dirs) {
  check(!dirs.empty(), k_op, "no partial runs given");
  std::vector<Part> parts;
  for (const auto& d : dirs) {
    nlohmann::json j = io::read_json_file(d / "calibration.json", k_op, "a run of `oal calibrate --shard i/n`");
    check(j.value("format", "") == "oal-calibration" && j.value("version", 0) == 1, k_op,
          "{}: expected format oal-calibration version 1", d.string());
    check(j.contains("shard") && j["shard"].is_object(), k_op,
          "{}: not a partial run (written without --shard)", d.string());
    parts.push_back({d, std::move(j)});
  }
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) {
    return a.meta["shard"].value("index", 0) < b.meta["shard"].value("index", 0);
  });
  const nlohmann::json first = run_identity(parts[0].meta);
  const int64_t n = parts[0].meta["shard"].value("count", int64_t(0));
  check(int64_t(parts.size()) == n, k_op, "expected all {} shards of the run, got {}", n, parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    check(parts[i].meta["shard"].value("index", int64_t(-1)) == int64_t(i), k_op,
          "{}: shard index {} given twice or missing (expected 0..{})", parts[i].dir.string(),
          parts[i].meta["shard"].value("index", int64_t(-1)), n - 1);
    const nlohmann::json id = run_identity(parts[i].meta);
    for (const auto& [key, value] : first.items())
      check(id.contains(key) && id[key] == value, k_op,
            "{}: '{}' differs from {} — these shards are not from one run", parts[i].dir.string(),
            key, parts[0].dir.string());
    check(parts[i].meta["shard"]["layers"] == parts[0].meta["shard"]["layers"], k_op,
          "{}: the run's layer list differs from shard 0's", parts[i].dir.string());
  }
  return parts;
}

}  // namespace

void merge_runs(const std::vector<fs::path>& dirs, const fs::path& out) {
  const std::vector<Part> parts = read_parts(dirs);
  const auto all_layers = parts[0].meta["shard"]["layers"].get<std::vector<int64_t>>();
  std::map<int64_t, nlohmann::json> layer_json;
  std::vector<nlohmann::json> fits;
  attn::ModelKernels oal, global;
  std::map<std::string, at::Tensor> baselines;
  for (const auto& p : parts) {
    for (const auto& lj : p.meta["layers"]) {
      const int64_t l = lj.at("layer").get<int64_t>();
      check(layer_json.emplace(l, lj).second, k_op, "layer {} appears in two shards", l);
    }
    for (const auto& f : p.meta["fits"]) fits.push_back(f);
    auto merge_kernels = [&](const char* file, attn::ModelKernels& into) {
      if (!fs::exists(p.dir / file)) return;
      const attn::ModelKernels k = attn::read_kernels(p.dir / file);
      into.head_dim = k.head_dim;
      into.meta = k.meta;
      for (const auto& [l, heads] : k.layers) into.layers[l] = heads;
    };
    merge_kernels("kernels-oal.json", oal);
    merge_kernels("kernels-global.json", global);
    if (fs::exists(p.dir / "baselines.safetensors"))
      for (auto& [name, t] : io::read_safetensors(p.dir / "baselines.safetensors").tensors)
        baselines[name] = t.clone();  // the file's mapping ends with this scope
  }
  check(layer_json.size() == all_layers.size(), k_op, "the shards hold {} layers, the run has {}",
        layer_json.size(), all_layers.size());
  // The order one process writes: layers as listed; fits by method (calibration order),
  // then layer, then as fitted.
  nlohmann::json meta = parts[0].meta;
  meta.erase("shard");
  meta["layers"] = nlohmann::json::array();
  for (int64_t l : all_layers) {
    check(layer_json.count(l), k_op, "layer {} is in no shard", l);
    meta["layers"].push_back(layer_json[l]);
  }
  const auto order = calibration_order(meta["methods"].get<std::vector<std::string>>());
  auto rank = [&](const nlohmann::json& f) {
    const auto m = std::find(order.begin(), order.end(), f.at("method").get<std::string>());
    const auto l = std::find(all_layers.begin(), all_layers.end(), f.at("layer").get<int64_t>());
    return std::make_pair(m - order.begin(), l - all_layers.begin());
  };
  std::stable_sort(fits.begin(), fits.end(),
                   [&](const nlohmann::json& a, const nlohmann::json& b) { return rank(a) < rank(b); });
  meta["fits"] = fits;
  std::error_code ec;
  fs::create_directories(out, ec);
  check(!ec && fs::is_directory(out), k_op, "cannot create directory {}: {}", out.string(), ec.message());
  if (!oal.layers.empty()) attn::write_kernels(out / "kernels-oal.json", oal);
  if (!global.layers.empty()) attn::write_kernels(out / "kernels-global.json", global);
  if (!baselines.empty()) io::write_safetensors(out / "baselines.safetensors", baselines);
  io::write_file_atomic(out / "calibration.json", meta.dump(2) + "\n");
}

}  // namespace oal::calib
