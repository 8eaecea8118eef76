#include "oal/convert/convert.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "oal/attention/method_store.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/registry.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/core/error.h"
#include "oal/formats/converted.h"
#include "oal/formats/fingerprint.h"
#include "oal/formats/hf_config.h"
#include "oal/io/atomic_file.h"
#include "oal/io/gguf.h"
#include "oal/io/safetensors.h"
#include "oal/text/gguf_tokenizer.h"

namespace oal::convert {
namespace fs = std::filesystem;
namespace {

constexpr const char* k_op = "convert";

void copy_file_atomic(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  check(in.good(), k_op, "cannot read '{}'", from.string());
  std::ostringstream s;
  s << in.rdbuf();
  io::write_file_atomic(to, s.str());
}

// A baseline's initial parameters for one layer, with the calibration run's draws.
std::shared_ptr<attn::AttentionMethod> initial_method(const attn::MethodStore& run,
                                                      const model::ModelConfig& c,
                                                      const std::string& method, int64_t layer) {
  const attn::MethodShape shape{layer, c.num_heads, c.num_kv_heads, c.head_dim, run.window};
  return attn::make_method(method, shape, run.seed, nullptr);
}

// Makes the kernel parameters of `m` trainable (a new OAL/global object; baselines in place).
std::shared_ptr<attn::QuadraticAttention> trainable_quadratic(const attn::QuadraticAttention& q) {
  return std::make_shared<attn::QuadraticAttention>(
      attn::QuadraticAttention::from_kernels(q.to_kernels(), q.options(), true, at::kDouble));
}

// A windowed layer trains its kernel and its c_h jointly (new objects).
std::shared_ptr<attn::AttentionMethod> make_trainable(std::shared_ptr<attn::AttentionMethod> m) {
  if (auto* q = dynamic_cast<const attn::QuadraticAttention*>(m.get()))
    return trainable_quadratic(*q);
  if (auto* w = dynamic_cast<const attn::WindowedAttention*>(m.get())) {
    std::shared_ptr<const attn::AttentionMethod> base = w->base();
    if (w->quadratic()) base = trainable_quadratic(*w->quadratic());
    if (w->feature_map())  // the baseline's own tensors, in place as for a plain one
      for (auto p : base->parameters())
        if (p.is_leaf() && p.is_floating_point()) p.set_requires_grad(true);
    auto out = std::make_shared<attn::WindowedAttention>(base, w->window(), w->log_scale(),
                                                         /*trainable=*/base != nullptr);
    out->set_full_heads(w->full_heads());
    return out;
  }
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

std::map<int64_t, std::shared_ptr<attn::AttentionMethod>> methods_from_calibration(
    const fs::path& calib_dir, const model::ModelWeights& weights, const std::string& method,
    const std::vector<int64_t>& layers, bool trainable, KernelInit init,
    const attn::Window& window) {
  std::map<int64_t, std::shared_ptr<attn::AttentionMethod>> out;
  if (is_exact_method(method)) return out;
  const bool window_only = attn::method_spec(method).kind == attn::MethodKind::window;
  if (window_only && calib_dir.empty()) {  // nothing fitted: the window is the method
    const model::ModelConfig& c = weights.config;
    for (int64_t l : layers)
      out[l] = attn::make_method(method, {l, c.num_heads, c.num_kv_heads, c.head_dim, window}, 0,
                                 nullptr);
    return out;
  }
  check(!calib_dir.empty(), k_op, "method '{}' needs a calibration run directory (--calib)",
        method);
  const attn::MethodStore run = attn::read_method_store(calib_dir);
  check(window.none() || window == run.window, k_op,
        "--sinks/--window ask for {} but the calibration run {} was fitted with {}: calibrate "
        "with the same --sinks and --window",
        window.describe(), calib_dir.string(), run.window.describe());
  formats::validate_stored_methods(run, weights, method, layers);
  for (const auto& lm : run.layers) {
    if (std::find(layers.begin(), layers.end(), lm.layer) == layers.end()) continue;
    std::shared_ptr<attn::AttentionMethod> m =
        starts_from_calibration(method, init)
            ? lm.methods.at(method)
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
    attn::MethodStore store;
    store.methods = {method};
    attn::ModelKernels kernels;
    kernels.head_dim = weights.config.head_dim;
    for (int64_t l : layers) {
      auto m = model.layer(l).attention;
      check(m && m->name() == method, k_op, "layer {} runs '{}', expected '{}'", l,
            m ? m->name() : "nothing", method);
      const auto* w = dynamic_cast<const attn::WindowedAttention*>(m.get());
      if (w) store.window = w->window();
      const attn::QuadraticAttention* q =
          w ? w->quadratic() : dynamic_cast<const attn::QuadraticAttention*>(m.get());
      if (q) kernels.layers[l] = q->to_kernels();
      store.layers.push_back({l, {{method, m}}});
    }
    if (!kernels.layers.empty()) store.kernels[method] = kernels;
    store.meta = {{"model", source_model},
                  {"model_fingerprint", formats::model_fingerprint(weights)}};
    attn::write_method_store(out / formats::k_converted_attention_dir, store);
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
  extra[formats::k_conversion_marker] = {
      {"format", "oal-converted"},
      {"version", 1},
      {"method", method},
      {"layers", layers},
      {"source_model", source_model},
      {"model_fingerprint", formats::model_fingerprint(weights)}};
  // config.json last: a directory without it is not mistaken for a finished export.
  formats::write_hf_config(out / "config.json", cfg, extra);
}

}  // namespace oal::convert
