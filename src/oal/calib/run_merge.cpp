#include "oal/calib/run_merge.h"

#include <algorithm>
#include <map>
#include <set>

#include "oal/attention/oal/kernel_json.h"
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
  nlohmann::json meta;       // calibration.json
  int64_t index = 0;         // shard i of n
  int64_t count = 0;
  std::vector<int64_t> run_layers;  // every layer of the run (the same in each shard)
};

// Everything but what differs between shards must be equal.
nlohmann::json run_identity(nlohmann::json j) {
  j["shard_count"] = j.contains("shard") ? j["shard"]["count"] : nlohmann::json();
  for (const char* k : {"layers", "fits", "shard"}) j.erase(k);
  return j;
}

// One partial run's calibration.json with its "shard" block read (integers checked).
Part read_part(const fs::path& d) {
  const std::string file = (d / "calibration.json").string();
  Part p;
  p.dir = d;
  p.meta = io::read_json_file(file, k_op, "a run of `oal calibrate --shard i/n`");
  const nlohmann::json& j = p.meta;
  check(j.is_object() && j.value("format", nlohmann::json()) == "oal-calibration" &&
            io::json_int_or(j, "version", 0, k_op, file + ": 'version'") == 1,
        k_op, "{}: expected format oal-calibration version 1", file);
  check(j.contains("shard") && j["shard"].is_object(), k_op,
        "{}: not a partial run (written without --shard)", file);
  const nlohmann::json& shard = j["shard"];
  p.index = io::json_int_or(shard, "index", -1, k_op, file + ": shard.index");
  p.count = io::json_int_or(shard, "count", 0, k_op, file + ": shard.count");
  check(shard.contains("layers"), k_op, "{}: shard has no 'layers' list", file);
  p.run_layers = io::json_int_list(shard["layers"], k_op, file + ": shard.layers");
  for (const char* key : {"layers", "fits"})
    check(j.contains(key) && j[key].is_array(), k_op, "{}: expected a list '{}'", file, key);
  return p;
}

std::vector<Part> read_parts(const std::vector<fs::path>& dirs) {
  check(!dirs.empty(), k_op, "no partial runs given");
  std::vector<Part> parts;
  for (const auto& d : dirs) parts.push_back(read_part(d));
  std::sort(parts.begin(), parts.end(),
            [](const Part& a, const Part& b) { return a.index < b.index; });
  const nlohmann::json first = run_identity(parts[0].meta);
  const int64_t n = parts[0].count;
  check(int64_t(parts.size()) == n, k_op, "expected all {} shards of the run, got {}", n,
        parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    check(parts[i].index == int64_t(i), k_op,
          "{}: shard index {} given twice or missing (expected 0..{})", parts[i].dir.string(),
          parts[i].index, n - 1);
    const nlohmann::json id = run_identity(parts[i].meta);
    for (const auto& [key, value] : first.items())
      check(id.contains(key) && id[key] == value, k_op,
            "{}: '{}' differs from {} — these shards are not from one run", parts[i].dir.string(),
            key, parts[0].dir.string());
    check(parts[i].run_layers == parts[0].run_layers, k_op,
          "{}: the run's layer list differs from shard 0's", parts[i].dir.string());
  }
  return parts;
}

// The "layer" of a layers[] or fits[] entry of a partial run.
int64_t layer_of(const nlohmann::json& entry, const Part& p, const char* list) {
  check(entry.is_object() && entry.contains("layer"), k_op, "{}: an entry of '{}' has no layer",
        p.dir.string(), list);
  return io::json_int(entry.at("layer"), k_op,
                      fmt::format("{}: {}[].layer", p.dir.string(), list));
}

}  // namespace

void merge_runs(const std::vector<fs::path>& dirs, const fs::path& out) {
  const std::vector<Part> parts = read_parts(dirs);
  const std::vector<int64_t>& all_layers = parts[0].run_layers;
  std::map<int64_t, nlohmann::json> layer_json;
  std::vector<std::pair<int64_t, nlohmann::json>> fits;  // (layer, entry)
  attn::ModelKernels oal, global;
  // The parameter files, by name: the feature baselines' tensors and the windowed
  // layers' c_h, each tensor named by its layer.
  std::map<std::string, std::map<std::string, at::Tensor>> tensor_files{
      {"baselines.safetensors", {}}, {"window.safetensors", {}}};
  for (const auto& p : parts) {
    for (const auto& lj : p.meta["layers"]) {
      const int64_t l = layer_of(lj, p, "layers");
      check(layer_json.emplace(l, lj).second, k_op, "layer {} appears in two shards", l);
    }
    for (const auto& f : p.meta["fits"]) {
      check(f.contains("method") && f["method"].is_string(), k_op,
            "{}: an entry of 'fits' has no method name", p.dir.string());
      fits.emplace_back(layer_of(f, p, "fits"), f);
    }
    auto merge_kernels = [&](const char* file, attn::ModelKernels& into) {
      if (!fs::exists(p.dir / file)) return;
      const attn::ModelKernels k = attn::read_kernels(p.dir / file);
      into.head_dim = k.head_dim;
      into.meta = k.meta;
      for (const auto& [l, heads] : k.layers) into.layers[l] = heads;
    };
    merge_kernels("kernels-oal.json", oal);
    merge_kernels("kernels-global.json", global);
    for (auto& [file, merged] : tensor_files)
      if (fs::exists(p.dir / file))
        for (auto& [name, t] : io::read_safetensors(p.dir / file).tensors)
          merged[name] = t.clone();  // the file's mapping ends with this scope
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
  check(meta.contains("methods") && meta["methods"].is_array(), k_op,
        "{}: expected a list 'methods'", parts[0].dir.string());
  std::vector<std::string> methods;
  for (const auto& m : meta["methods"]) {
    check(m.is_string(), k_op, "{}: 'methods' must hold names", parts[0].dir.string());
    methods.push_back(m.get<std::string>());
  }
  const auto order = calibration_order(methods);
  auto rank = [&](const std::pair<int64_t, nlohmann::json>& f) {
    const auto m = std::find(order.begin(), order.end(), f.second.at("method").get<std::string>());
    const auto l = std::find(all_layers.begin(), all_layers.end(), f.first);
    return std::make_pair(m - order.begin(), l - all_layers.begin());
  };
  std::stable_sort(fits.begin(), fits.end(),
                   [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  meta["fits"] = nlohmann::json::array();
  for (const auto& f : fits) meta["fits"].push_back(f.second);
  std::error_code ec;
  fs::create_directories(out, ec);
  check(!ec && fs::is_directory(out), k_op, "cannot create directory {}: {}", out.string(),
        ec.message());
  if (!oal.layers.empty()) attn::write_kernels(out / "kernels-oal.json", oal);
  if (!global.layers.empty()) attn::write_kernels(out / "kernels-global.json", global);
  for (const auto& [file, merged] : tensor_files)
    if (!merged.empty()) io::write_safetensors(out / file, merged);
  io::write_file_atomic(out / "calibration.json", meta.dump(2) + "\n");
}

}  // namespace oal::calib
