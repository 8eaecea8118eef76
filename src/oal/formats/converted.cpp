#include "oal/formats/converted.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "oal/adapt/hybrid.h"
#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/registry.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/core/error.h"
#include "oal/formats/fingerprint.h"
#include "oal/io/json_file.h"

namespace oal::formats {
namespace fs = std::filesystem;
namespace {

constexpr const char* k_op = "convert";

// Query heads, KV heads (0 = not recorded) and head_dim of a stored method.
struct MethodShape {
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
};

MethodShape method_shape(const attn::AttentionMethod& m) {
  if (auto* w = dynamic_cast<const attn::WindowedAttention*>(&m))
    return w->base() ? method_shape(*w->base()) : MethodShape{};
  if (auto* q = dynamic_cast<const attn::QuadraticAttention*>(&m))
    return {q->kernels().heads(), 0, q->kernels().dim()};
  if (auto* f = dynamic_cast<const attn::FeatureMapMethod*>(&m))
    return {f->q_heads(), f->kv_heads(), f->head_dim()};
  return {};
}

// A stored layer's method fits the model's attention shape `c`.
void check_shape(const attn::AttentionMethod& m, int64_t layer, const model::ModelConfig& c) {
  const MethodShape s = method_shape(m);
  check(s.q_heads == 0 || s.q_heads == c.num_heads, k_op,
        "calibration layer {} has {} query heads, the model {}: it belongs to another model", layer,
        s.q_heads, c.num_heads);
  check(s.kv_heads == 0 || s.kv_heads == c.num_kv_heads, k_op,
        "calibration layer {} has {} KV heads, the model {}: it belongs to another model", layer,
        s.kv_heads, c.num_kv_heads);
  check(s.head_dim == 0 || s.head_dim == c.head_dim, k_op,
        "calibration layer {} has head_dim {}, the model {}: it belongs to another model", layer,
        s.head_dim, c.head_dim);
}

}  // namespace

namespace {

// validate_stored_methods for a model of `config` whose fingerprint is `fingerprint`.
void validate_methods(const attn::MethodStore& store, const model::ModelConfig& config,
                      const std::string& fingerprint, const std::string& method,
                      const std::vector<int64_t>& layers) {
  check(std::find(store.methods.begin(), store.methods.end(), method) != store.methods.end(), k_op,
        "the calibration run has no '{}' (it holds: {})", method, fmt::join(store.methods, ", "));
  if (store.meta.contains("model_fingerprint"))
    check(store.meta["model_fingerprint"] == fingerprint, k_op,
          "the calibration run was made for another model (fingerprint {} of '{}', this model "
          "{}); calibrate this model with `oal calibrate`",
          store.meta["model_fingerprint"].dump(), store.meta.value("model", std::string("?")),
          fingerprint);
  std::vector<int64_t> have;
  for (const auto& lm : store.layers) {
    have.push_back(lm.layer);
    check(lm.layer >= 0 && lm.layer < config.num_layers, k_op,
          "the calibration run has layer {} but the model has only {} layers: it belongs to "
          "another model",
          lm.layer, config.num_layers);
    const auto it = lm.methods.find(method);
    if (it != lm.methods.end() && it->second) check_shape(*it->second, lm.layer, config);
  }
  for (int64_t l : layers) {
    check(l >= 0 && l < config.num_layers, k_op, "layer {} out of range: the model has {} layers",
          l, config.num_layers);
    check(std::find(have.begin(), have.end(), l) != have.end(), k_op,
          "layer {} was not calibrated (the run holds layers {}); calibrate it or choose "
          "--layers among those",
          l, fmt::join(have, ","));
  }
}

}  // namespace

void validate_stored_methods(const attn::MethodStore& store, const model::ModelWeights& weights,
                             const std::string& method, const std::vector<int64_t>& layers) {
  validate_methods(store, weights.config, model_fingerprint(weights), method, layers);
}

namespace {

// config.json of a directory, when it has one and it carries "oal_conversion": the
// one read of it that building a converted model needs.
std::optional<nlohmann::json> conversion_config(const fs::path& path) {
  if (!fs::is_directory(path) || !fs::exists(path / "config.json")) return std::nullopt;
  nlohmann::json config = io::read_json_file(path / "config.json", k_op);
  if (!config.contains(k_conversion_marker)) return std::nullopt;
  return config;
}

// The "oal_conversion" marker of a converted directory's config.json, checked: the
// format, the method and the converted layers. A malformed marker (missing or mistyped
// fields, a non-integer layer) is an oal::Error naming it.
Conversion read_marker(const std::string& path, const nlohmann::json& config) {
  const nlohmann::json& m = config.at(k_conversion_marker);
  const auto bad = [&](const std::string& what) {
    fail(k_op,
         "{}: config.json 'oal_conversion' {}; expected an object with format "
         "oal-converted, version 1, model_fingerprint, method and integer layers",
         path, what);
  };
  if (!m.is_object()) bad("is not an object");
  const auto string_field = [&](const char* key) {
    if (!m.contains(key) || !m.at(key).is_string()) bad(fmt::format("has no string '{}'", key));
    return m.at(key).get<std::string>();
  };
  const std::string where = path + ": config.json 'oal_conversion'";
  check(string_field("format") == "oal-converted" &&
            io::json_int_or(m, "version", 0, k_op, where + " version") == 1,
        k_op, "{}: 'oal_conversion' must be format oal-converted version 1", path);
  if (!m.contains("layers")) bad("has no array 'layers'");
  return {string_field("method"), io::json_int_list(m.at("layers"), k_op, where + " layers"),
          string_field("model_fingerprint")};
}

// The converted layers' methods as stored (a converted directory stores them as they
// are to be used); none for the exact method.
std::map<int64_t, std::shared_ptr<attn::AttentionMethod>> stored_methods(
    const std::string& path, const model::ModelConfig& config, const std::string& fingerprint,
    const Conversion& marker) {
  std::map<int64_t, std::shared_ptr<attn::AttentionMethod>> out;
  if (attn::method_spec(marker.method).kind == attn::MethodKind::exact) return out;
  const attn::MethodStore store =
      attn::read_method_store(fs::path(path) / k_converted_attention_dir);
  validate_methods(store, config, fingerprint, marker.method, marker.layers);
  for (const auto& lm : store.layers)
    if (std::find(marker.layers.begin(), marker.layers.end(), lm.layer) != marker.layers.end())
      out[lm.layer] = lm.methods.at(marker.method);
  return out;
}

}  // namespace

std::optional<Conversion> read_conversion(const fs::path& path) {
  const std::optional<nlohmann::json> config = conversion_config(path);
  if (!config) return std::nullopt;
  return read_marker(path.string(), *config);
}

std::unique_ptr<model::Transformer> build_transformer(model::ModelWeights weights,
                                                      const std::string& path,
                                                      model::TransformerOptions options,
                                                      at::Device device) {
  if (!device.is_cpu())
    for (auto& [n, t] : weights.tensors) t = t.to(device);
  const std::optional<nlohmann::json> config = conversion_config(path);
  // The fingerprint reads the embedding as loaded: taken before the Transformer may
  // convert the weights' format.
  const std::string fingerprint = config ? model_fingerprint(weights) : std::string();
  auto t = std::make_unique<model::Transformer>(weights, options);
  if (!config) return t;
  const Conversion marker = read_marker(path, *config);
  check(marker.model_fingerprint == fingerprint, k_op,
        "{}: config.json does not match the model the conversion was made for", path);
  adapt::apply_hybrid(*t, stored_methods(path, weights.config, fingerprint, marker));
  return t;
}

std::unique_ptr<model::Transformer> load_transformer(const std::string& path,
                                                     model::TransformerOptions options,
                                                     at::Device device) {
  // Quantized GGUF tensors stay quantized for the CPU kernels; Transformer converts them
  // as options.weights asks. Other devices get fp32 (no quantized kernels there).
  return build_transformer(load_model(path, {.keep_quantized = device.is_cpu()}), path, options,
                           device);
}

}  // namespace oal::formats
