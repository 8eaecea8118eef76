#include "oal/attention/method_store.h"

#include <fmt/format.h>

#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/registry.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/core/error.h"
#include "oal/io/atomic_file.h"
#include "oal/io/json_file.h"
#include "oal/io/safetensors.h"

namespace oal::attn {
namespace {

constexpr std::string_view k_op = "calibration_run";
namespace fs = std::filesystem;

// The manifest's "layers" entry of `lm`; a feature-map method's tensors go to `tensors`,
// a windowed method's c_h to `scales`.
nlohmann::json layer_json(const LayerMethods& lm, std::map<std::string, at::Tensor>& tensors,
                          std::map<std::string, at::Tensor>& scales) {
  nlohmann::json lj{{"layer", lm.layer}};
  for (const auto& [name, m] : lm.methods) {
    const auto* w = dynamic_cast<const WindowedAttention*>(m.get());
    if (w && !w->full_heads().none()) lj["full_kv_heads"] = w->full_heads().kv;
    if (w && w->base())
      scales[fmt::format("{}.layers.{}.log_scale", name, lm.layer)] =
          w->log_scale().detach().to(at::kFloat).contiguous();
    // A feature-map baseline's tensors, windowed or not.
    const FeatureMapMethod* fm =
        w ? w->feature_map() : dynamic_cast<const FeatureMapMethod*>(m.get());
    if (!fm) continue;
    lj["q_heads"] = fm->q_heads();
    lj["kv_heads"] = fm->kv_heads();
    lj["head_dim"] = fm->head_dim();
    for (const auto& [p, t] : fm->state_dict())
      tensors[fmt::format("{}.layers.{}.{}", name, lm.layer, p)] = t.contiguous();
  }
  return lj;
}

}  // namespace

void write_method_store(const fs::path& dir, const MethodStore& store) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  check(!ec && fs::is_directory(dir), k_op, "cannot create directory {}: {}", dir.string(),
        ec.message());
  nlohmann::json j = store.meta.is_object() ? store.meta : nlohmann::json::object();
  j["format"] = "oal-calibration";
  j["version"] = 1;
  j["methods"] = store.methods;
  j["seed"] = store.seed;
  j["sinks"] = store.window.sinks;
  j["window"] = store.window.recent;
  std::map<std::string, at::Tensor> tensors, scales;
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& lm : store.layers) layers.push_back(layer_json(lm, tensors, scales));
  j["layers"] = layers;
  for (const auto& [name, k] : store.kernels)
    if (!k.layers.empty()) write_kernels(dir / ("kernels-" + name + ".json"), k);
  if (!tensors.empty()) io::write_safetensors(dir / "baselines.safetensors", tensors);
  if (!scales.empty()) io::write_safetensors(dir / "window.safetensors", scales);
  // The manifest last: a directory without it is not taken for a finished store.
  io::write_file_atomic(dir / "calibration.json", j.dump(2) + "\n");
}

namespace {

// One layer's methods described by its manifest entry `lj`, from the files beside it.
// The files of parameters beside the manifest: the baselines' and the windows' c_h.
struct StoredTensors {
  io::SafetensorsFile baselines, scales;
  fs::path baselines_path, scales_path;
};

LayerMethods read_layer(const nlohmann::json& lj, const MethodStore& store,
                        const StoredTensors& files) {
  const io::SafetensorsFile& st = files.baselines;
  const fs::path& st_path = files.baselines_path;
  LayerMethods lm;
  lm.layer = io::json_int(lj.at("layer"), k_op, "calibration.json: layers[].layer");
  auto size = [&](const char* key) {  // written when the layer has a feature-map method
    return io::json_int_or(lj, key, 0, k_op, fmt::format("calibration.json: layers[].{}", key));
  };
  for (const auto& name : store.methods) {
    const auto found = store.kernels.find(name);
    const ModelKernels* k = found == store.kernels.end() ? nullptr : &found->second;
    MethodShape shape{lm.layer, size("q_heads"), size("kv_heads"), size("head_dim"), store.window};
    if (k) {
      const auto& ks = k->layer(lm.layer);
      shape.q_heads = int64_t(ks.size());
      shape.kv_heads = shape.kv_heads ? shape.kv_heads : 1;
      shape.head_dim = ks.at(0).dim();
    } else if (method_spec(name).kind == MethodKind::exact ||
               method_spec(name).kind == MethodKind::window) {
      shape = {lm.layer, 1, 1, 1, store.window};
    }
    // A feature-map baseline is built plain, its parameters loaded, then windowed.
    const bool features = method_spec(name).kind == MethodKind::feature_map;
    MethodShape plain = shape;
    if (features) plain.window = {};
    std::shared_ptr<AttentionMethod> m = make_method(name, plain, store.seed, k);
    if (auto* fm = dynamic_cast<FeatureMapMethod*>(m.get())) {
      TensorMap params;
      const std::string prefix = fmt::format("{}.layers.{}.", name, lm.layer);
      for (const auto& [key, t] : st.tensors)
        if (key.rfind(prefix, 0) == 0) params[key.substr(prefix.size())] = t;
      check(!params.empty(), k_op, "{}: no parameters for {} layer {}", st_path.string(), name,
            lm.layer);
      fm->load_state_dict(params);
    }
    if (features && !store.window.none())
      m = std::make_shared<WindowedAttention>(m, store.window, at::zeros({shape.q_heads}));
    if (auto* w = dynamic_cast<WindowedAttention*>(m.get()); w && w->base()) {
      const std::string key = fmt::format("{}.layers.{}.log_scale", name, lm.layer);
      const auto it = files.scales.tensors.find(key);
      check(it != files.scales.tensors.end(), k_op, "{}: no '{}' (the c_h of a windowed layer)",
            files.scales_path.string(), key);
      w->load_log_scale(it->second);
    }
    if (lj.contains("full_kv_heads")) {
      auto* w = dynamic_cast<WindowedAttention*>(m.get());
      check(w != nullptr, k_op,
            "calibration.json: layer {} keeps full KV heads, but its method '{}' has no window",
            lm.layer, name);
      FullHeads full;
      for (const auto& h : lj.at("full_kv_heads"))
        full.kv.push_back(io::json_int(h, k_op, "calibration.json: layers[].full_kv_heads"));
      w->set_full_heads(std::move(full));
    }
    lm.methods[name] = m;
  }
  return lm;
}

// The store described by manifest `j` (an object of the right format) and the files
// beside it in `dir`.
MethodStore read_store_json(const fs::path& dir, const nlohmann::json& j) {
  MethodStore store;
  store.meta = j;
  store.methods = j.at("methods").get<std::vector<std::string>>();
  store.seed = io::json_uint(j.at("seed"), k_op, "calibration.json: 'seed'");
  store.window = {io::json_int_or(j, "sinks", 0, k_op, "calibration.json: 'sinks'"),
                  io::json_int_or(j, "window", 0, k_op, "calibration.json: 'window'")};
  store.window.validate(k_op);
  for (const auto& m : store.methods)
    if (method_spec(m).kind == MethodKind::quadratic)
      store.kernels[m] = read_kernels(dir / ("kernels-" + m + ".json"));
  StoredTensors files{{}, {}, dir / "baselines.safetensors", dir / "window.safetensors"};
  if (fs::exists(files.baselines_path))
    files.baselines = io::read_safetensors(files.baselines_path);
  if (fs::exists(files.scales_path)) files.scales = io::read_safetensors(files.scales_path);
  for (const auto& lj : j.at("layers")) store.layers.push_back(read_layer(lj, store, files));
  return store;
}

}  // namespace

MethodStore read_method_store(const fs::path& dir) {
  const fs::path cj = dir / "calibration.json";
  check(fs::exists(cj), k_op,
        "{}: no calibration.json (expected a calibration run, made by `oal calibrate`, or a "
        "converted model's oal_attention/ directory)",
        dir.string());
  const nlohmann::json j = io::read_json_file(cj, k_op);
  check(j.is_object(), k_op, "{}: expected a JSON object (format oal-calibration), got {}",
        cj.string(), j.type_name());
  try {
    check(j.value("format", "") == "oal-calibration" &&
              io::json_int_or(j, "version", 0, k_op, "calibration.json: 'version'") == 1,
          k_op, "{}: expected format oal-calibration version 1", cj.string());
    return read_store_json(dir, j);
  } catch (const nlohmann::json::exception& e) {
    fail(k_op, "{}: a field is missing or of the wrong type ({})", cj.string(), e.what());
  }
}

}  // namespace oal::attn
