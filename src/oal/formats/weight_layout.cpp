#include "oal/formats/weight_layout.h"

#include <fmt/format.h>

#include "oal/core/error.h"

namespace oal::formats {
namespace {

constexpr std::string_view k_op = "load";

std::string shape_text(c10::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::map<std::string, std::vector<int64_t>> expected_tensor_shapes(const model::ModelConfig& c) {
  const int64_t h = c.hidden_size, q_rows = c.num_heads * c.head_dim,
                kv_rows = c.num_kv_heads * c.head_dim, f = c.intermediate_size;
  std::map<std::string, std::vector<int64_t>> m;
  m["model.embed_tokens.weight"] = {c.vocab_size, h};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    m[p + "input_layernorm.weight"] = {h};
    m[p + "self_attn.q_proj.weight"] = {q_rows, h};
    m[p + "self_attn.k_proj.weight"] = {kv_rows, h};
    m[p + "self_attn.v_proj.weight"] = {kv_rows, h};
    if (c.attention_bias) {
      m[p + "self_attn.q_proj.bias"] = {q_rows};
      m[p + "self_attn.k_proj.bias"] = {kv_rows};
      m[p + "self_attn.v_proj.bias"] = {kv_rows};
    }
    m[p + "self_attn.o_proj.weight"] = {h, q_rows};
    m[p + "post_attention_layernorm.weight"] = {h};
    m[p + "mlp.gate_proj.weight"] = {f, h};
    m[p + "mlp.up_proj.weight"] = {f, h};
    m[p + "mlp.down_proj.weight"] = {h, f};
  }
  m["model.norm.weight"] = {h};
  if (!c.tie_word_embeddings) m["lm_head.weight"] = {c.vocab_size, h};
  return m;
}

void validate_weights(const model::ModelWeights& w, const std::string& src) {
  const auto expected = expected_tensor_shapes(w.config);
  for (const auto& [name, shape] : expected) {
    if (auto q = w.quantized.find(name); q != w.quantized.end()) {
      check(std::vector<int64_t>{q->second.rows, q->second.cols} == shape &&
                w.tensors.count(name) == 0,
            k_op, "{}: quantized tensor '{}': expected {}, file has [{}, {}]", src, name,
            shape_text(shape), q->second.rows, q->second.cols);
      continue;
    }
    auto it = w.tensors.find(name);
    check(it != w.tensors.end(), k_op, "{}: missing tensor '{}' (expected shape {})", src, name,
          shape_text(shape));
    const at::Tensor& t = it->second;
    check(t.sizes().vec() == shape, k_op, "{}: tensor '{}': expected {}, file has {}", src, name,
          shape_text(shape), shape_text(t.sizes()));
    const auto st = t.scalar_type();
    check(st == at::kFloat || st == at::kBFloat16 || st == at::kHalf, k_op,
          "{}: tensor '{}': expected dtype F32, BF16 or F16, file has {}", src, name,
          c10::toString(st));
    check(t.device().is_cpu(), k_op, "{}: tensor '{}': expected a CPU tensor", src, name);
  }
  for (const auto& [name, q] : w.quantized)
    check(expected.count(name) > 0, k_op, "{}: unexpected quantized tensor '{}'", src, name);
  for (const auto& [name, t] : w.tensors)
    check(expected.count(name) > 0, k_op,
          "{}: unexpected tensor '{}' for {} with this config (attention_bias {}, tied {})", src,
          name, w.config.architecture, w.config.attention_bias, w.config.tie_word_embeddings);
}

}  // namespace oal::formats
