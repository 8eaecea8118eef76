#include "oal/io/json_file.h"
#include "oal/convert/convert.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <fstream>
#include <sstream>

#include "oal/attention/feature_method.h"
#include "oal/attention/oal_method.h"
#include "oal/attention/registry.h"
#include "oal/core/error.h"
#include "oal/io/gguf.h"
#include "oal/text/gguf_tokenizer.h"
#include "oal/io/atomic_file.h"
#include "oal/io/safetensors.h"
#include "oal/model/fingerprint.h"
#include "oal/model/hf_config.h"
#include "oal/model/hybrid.h"
#include "oal/model/load.h"

namespace oal::convert {
namespace fs = std::filesystem;
namespace {

constexpr const char* k_op = "convert";
constexpr const char* k_marker = "oal_conversion";
constexpr const char* k_attention_dir = "oal_attention";

// Query heads, KV heads (0 = not recorded) and head_dim of a calibrated method.
struct Shape {
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
};

Shape method_shape(const attn::AttentionMethod& m) {
  if (auto* q = dynamic_cast<const attn::QuadraticAttention*>(&m))
    return {q->kernels().heads(), 0, q->kernels().dim()};
  if (auto* f = dynamic_cast<const attn::FeatureMapMethod*>(&m))
    return {f->q_heads(), f->kv_heads(), f->head_dim()};
  return {};
}

nlohmann::json read_json_file(const fs::path& p) { return io::read_json_file(p, k_op); }

void copy_file_atomic(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  check(in.good(), k_op, "cannot read '{}'", from.string());
  std::ostringstream s;
  s << in.rdbuf();
  io::write_file_atomic(to, s.str());
}

// A baseline's initial parameters for one layer, with the calibration run's draws.
std::shared_ptr<attn::AttentionMethod> initial_method(const calib::LoadedRun& run,
                                                      const model::ModelConfig& c,
                                                      const std::string& method, int64_t layer) {
  check(run.meta.contains("seed"), k_op,
        "calibration.json has no seed; expected one to rebuild {}'s initial draws", method);
  const attn::MethodShape shape{layer, c.num_heads, c.num_kv_heads, c.head_dim};
  return attn::make_method(method, shape,
                           io::json_uint(run.meta.at("seed"), k_op, "calibration.json: 'seed'"),
                           nullptr);
}

// Makes the kernel parameters of `m` trainable (a new OAL/global object; baselines in place).
std::shared_ptr<attn::AttentionMethod> make_trainable(std::shared_ptr<attn::AttentionMethod> m) {
  if (auto* q = dynamic_cast<const attn::QuadraticAttention*>(m.get()))
    return std::make_shared<attn::QuadraticAttention>(
        attn::QuadraticAttention::from_kernels(q->to_kernels(), q->options(), true, at::kDouble));
  for (auto p : m->parameters())
    if (p.is_leaf() && p.is_floating_point()) p.set_requires_grad(true);
  return m;
}

}  // namespace

std::string kernel_init_name(KernelInit init) {
  return init == KernelInit::initial ? "initial" : "calibrated";
}

KernelInit parse_kernel_init(const std::string& name) {
  if (name == "initial") return KernelInit::initial;
  if (name == "calibrated") return KernelInit::calibrated;
  fail(k_op, "--init '{}': expected initial or calibrated", name);
}

bool starts_from_calibration(const std::string& method, KernelInit init) {
  // The quadratic kernels (oal, global) always start from their fit (paper App. F).
  return init == KernelInit::calibrated ||
         attn::method_spec(method).kind == attn::MethodKind::quadratic;
}

bool is_exact_method(const std::string& method) {
  return attn::method_spec(method).kind == attn::MethodKind::exact;
}

void validate_calibration(const calib::LoadedRun& run, const model::ModelWeights& weights,
                          const std::string& method, const std::vector<int64_t>& layers) {
  const model::ModelConfig& config = weights.config;
  check(std::find(run.methods.begin(), run.methods.end(), method) != run.methods.end(), k_op,
        "the calibration run has no '{}' (it holds: {})", method, fmt::join(run.methods, ", "));
  if (run.meta.contains("model_fingerprint")) {
    const std::string mine = model::model_fingerprint(weights);
    check(run.meta["model_fingerprint"] == mine, k_op,
          "the calibration run was made for another model (fingerprint {} of '{}', this model "
          "{}); calibrate this model with `oal calibrate`",
          run.meta["model_fingerprint"].dump(), run.meta.value("model", std::string("?")), mine);
  }
  std::vector<int64_t> have;
  for (const auto& lm : run.layers) {
    have.push_back(lm.layer);
    check(lm.layer >= 0 && lm.layer < config.num_layers, k_op,
          "the calibration run has layer {} but the model has only {} layers: it belongs to "
          "another model",
          lm.layer, config.num_layers);
    auto it = lm.methods.find(method);
    if (it == lm.methods.end() || !it->second) continue;
    const Shape s = method_shape(*it->second);
    check(s.q_heads == 0 || s.q_heads == config.num_heads, k_op,
          "calibration layer {} has {} query heads, the model {}: it belongs to another model",
          lm.layer, s.q_heads, config.num_heads);
    check(s.kv_heads == 0 || s.kv_heads == config.num_kv_heads, k_op,
          "calibration layer {} has {} KV heads, the model {}: it belongs to another model",
          lm.layer, s.kv_heads, config.num_kv_heads);
    check(s.head_dim == 0 || s.head_dim == config.head_dim, k_op,
          "calibration layer {} has head_dim {}, the model {}: it belongs to another model",
          lm.layer, s.head_dim, config.head_dim);
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

std::map<int64_t, std::shared_ptr<attn::AttentionMethod>> methods_from_calibration(
    const fs::path& calib_dir, const model::ModelWeights& weights, const std::string& method,
    const std::vector<int64_t>& layers, bool trainable, KernelInit init) {
  std::map<int64_t, std::shared_ptr<attn::AttentionMethod>> out;
  if (is_exact_method(method)) return out;
  check(!calib_dir.empty(), k_op, "method '{}' needs a calibration run directory (--calib)", method);
  const calib::LoadedRun run = calib::read_run(calib_dir);
  validate_calibration(run, weights, method, layers);
  for (const auto& lm : run.layers) {
    if (std::find(layers.begin(), layers.end(), lm.layer) == layers.end()) continue;
    std::shared_ptr<attn::AttentionMethod> m =
        starts_from_calibration(method, init) ? lm.methods.at(method)
                                              : initial_method(run, weights.config, method, lm.layer);
    if (trainable) m = make_trainable(std::move(m));
    out[lm.layer] = m;
  }
  return out;
}

std::map<std::string, at::Tensor> kernel_parameters(const model::Transformer& model,
                                                    const std::vector<int64_t>& layers) {
  std::map<std::string, at::Tensor> out;
  for (int64_t l : layers) {
    const auto ps = model.attention(l).parameters();
    for (size_t j = 0; j < ps.size(); ++j)
      if (ps[j].requires_grad()) out[fmt::format("attention.layers.{}.{}", l, j)] = ps[j];
  }
  return out;
}

void export_converted(const fs::path& out, const model::ModelWeights& weights,
                      const model::Transformer& model, const std::string& method,
                      const std::vector<int64_t>& layers, const std::string& source_model,
                      const fs::path& tokenizer) {
  std::error_code ec;
  fs::create_directories(out, ec);
  check(!ec && fs::is_directory(out), k_op, "cannot create '{}': {}", out.string(), ec.message());
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [n, t] : weights.tensors) tensors[n] = t.detach().to(at::kCPU);
  io::write_safetensors(out / "model.safetensors", tensors);
  if (!is_exact_method(method) && !layers.empty()) {
    calib::CalibrationResult res;
    attn::ModelKernels kernels;
    kernels.head_dim = weights.config.head_dim;
    for (int64_t l : layers) {
      auto m = model.layer(l).attention;
      check(m && m->name() == method, k_op, "layer {} runs '{}', expected '{}'", l,
            m ? m->name() : "nothing", method);
      if (auto* q = dynamic_cast<const attn::QuadraticAttention*>(m.get()))
        kernels.layers[l] = q->to_kernels();
      res.layers.push_back({l, {{method, m}}});
    }
    if (!kernels.layers.empty()) res.kernels[method] = kernels;
    calib::CalibrationOptions opts;
    opts.methods = {method};
    calib::RunInfo info;
    info.model = source_model;
    info.fingerprint = model::model_fingerprint(weights);
    calib::write_run(out / k_attention_dir, res, opts, info);
  }
  // A GGUF source keeps only its tokenizer metadata (not a copy of its weights).
  if (!tokenizer.empty() && io::is_gguf_file(tokenizer))
    text::write_gguf_tokenizer(tokenizer, out / "tokenizer.gguf");
  else if (!tokenizer.empty())
    copy_file_atomic(tokenizer, out / tokenizer.filename());
  model::ModelConfig cfg = weights.config;
  nlohmann::json extra;
  if (cfg.rope_style == model::RopeStyle::adjacent) {
    cfg.rope_style = model::RopeStyle::half;  // written as half + the marker below
    extra["oal_rope_style"] = "adjacent";
  }
  extra[k_marker] = {{"format", "oal-converted"}, {"version", 1},       {"method", method},
                     {"layers", layers},         {"source_model", source_model},
                     {"model_fingerprint", model::model_fingerprint(weights)}};
  // config.json last: a directory without it is not mistaken for a finished export.
  model::write_hf_config(out / "config.json", cfg, extra);
}

bool is_converted_dir(const fs::path& path) {
  if (!fs::is_directory(path) || !fs::exists(path / "config.json")) return false;
  return read_json_file(path / "config.json").contains(k_marker);
}

model::ModelWeights load_weights_on(const std::string& path, at::Device device,
                                    model::LoadOptions options) {
  model::ModelWeights w = model::load_model(path, options);
  if (!device.is_cpu())
    for (auto& [n, t] : w.tensors) t = t.to(device);
  return w;
}

namespace {

// The "oal_conversion" marker of a converted directory's config.json, checked: the
// format, the model it was made for, the method and the converted layers. A malformed
// marker (missing or mistyped fields, a non-integer layer) is an oal::Error naming it.
struct ConversionMarker {
  std::string method;
  std::vector<int64_t> layers;
};

ConversionMarker read_marker(const std::string& path, const model::ModelWeights& weights) {
  const nlohmann::json config = read_json_file(fs::path(path) / "config.json");
  const nlohmann::json& m = config.at(k_marker);
  const auto bad = [&](const std::string& what) {
    fail(k_op, "{}: config.json 'oal_conversion' {}; expected an object with format "
         "oal-converted, version 1, model_fingerprint, method and integer layers", path, what);
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
  check(string_field("model_fingerprint") == model::model_fingerprint(weights), k_op,
        "{}: config.json does not match the model the conversion was made for", path);
  if (!m.contains("layers")) bad("has no array 'layers'");
  return {string_field("method"), io::json_int_list(m.at("layers"), k_op, where + " layers")};
}

}  // namespace

std::unique_ptr<model::Transformer> load_transformer(const std::string& path,
                                                     model::TransformerOptions options,
                                                     at::Device device) {
  // Quantized GGUF tensors stay quantized for the CPU kernels; Transformer converts them
  // as options.weights asks. Other devices get fp32 (no quantized kernels there).
  auto weights = load_weights_on(path, device, {.keep_quantized = device.is_cpu()});
  auto t = std::make_unique<model::Transformer>(weights, options);
  if (!is_converted_dir(path)) return t;
  const ConversionMarker marker = read_marker(path, weights);
  // A converted directory stores the methods as they are to be used: take them all.
  auto methods = methods_from_calibration(fs::path(path) / k_attention_dir, weights,
                                          marker.method, marker.layers, false, KernelInit::calibrated);
  model::apply_hybrid(*t, methods);
  return t;
}

}  // namespace oal::convert
