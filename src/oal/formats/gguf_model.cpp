#include "oal/formats/gguf_model.h"

#include <array>
#include <cmath>

#include "oal/core/error.h"
#include "oal/formats/weight_layout.h"
#include "oal/io/gguf_quants.h"

namespace oal::formats {
namespace {

constexpr std::string_view k_op = "gguf model";
constexpr const char* k_rope_freqs = "rope_freqs.weight";

struct Keys {
  const io::GgufHeader& h;
  std::string arch;

  const io::GgufValue* find(const std::string& name) const { return h.find(arch + "." + name); }
  int64_t integer(const std::string& name) const {
    const std::string key = arch + "." + name;
    const io::GgufValue* v = h.find(key);
    check(v != nullptr, k_op, "metadata key '{}' is missing", key);
    return v->as_int(key);
  }
  int64_t integer_or(const std::string& name, int64_t fallback) const {
    const io::GgufValue* v = find(name);
    return v ? v->as_int(arch + "." + name) : fallback;
  }
  double number_or(const std::string& name, double fallback) const {
    const io::GgufValue* v = find(name);
    return v ? v->as_float(arch + "." + name) : fallback;
  }
};

void check_positive(int64_t v, const std::string& key) {
  check(v > 0 && v < (int64_t{1} << 31), k_op, "metadata '{}' = {}: expected a positive size", key,
        v);
}

// Partial rotary embeddings are refused; scaling: none, linear (every frequency divided
// by rope.scaling.factor, returned as per-pair factors) or rope_freqs.weight (read with
// the tensors, load_gguf_model). Other types (yarn, longrope) are refused by name.
std::vector<double> rope_factors_from_metadata(const Keys& k, int64_t head_dim) {
  const int64_t rot = k.integer_or("rope.dimension_count", head_dim);
  check(rot == head_dim, k_op,
        "{}.rope.dimension_count = {} but head_dim is {}: partial rotary "
        "embeddings are not supported",
        k.arch, rot, head_dim);
  const io::GgufValue* t = k.find("rope.scaling.type");
  const std::string type = t ? t->as_string(k.arch + ".rope.scaling.type") : "none";
  if (type == "none") return {};
  check(type == "linear", k_op,
        "{}.rope.scaling.type '{}' is not supported (none, linear, or Llama-3 rope_freqs.weight)",
        k.arch, type);
  const double factor = k.number_or("rope.scaling.factor", 0.0);
  check(std::isfinite(factor) && factor > 0, k_op,
        "{}.rope.scaling.factor = {}: linear RoPE scaling needs a factor > 0", k.arch, factor);
  return std::vector<double>(static_cast<size_t>(head_dim / 2), factor);
}

std::optional<int64_t> token_id(const io::GgufHeader& h, const std::string& key) {
  const io::GgufValue* v = h.find(key);
  if (v == nullptr) return std::nullopt;
  return v->as_int(key);
}

// GGUF tensor name → HF name (nullopt: a name this loader does not know).
std::optional<std::string> hf_name(const std::string& name) {
  static const std::array<std::pair<const char*, const char*>, 3> top = {{
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  }};
  for (const auto& [g, hf] : top)
    if (name == g) return std::string(hf);
  static const std::array<std::pair<const char*, const char*>, 12> layer = {{
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  }};
  if (name.rfind("blk.", 0) != 0) return std::nullopt;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return std::nullopt;
  const std::string index = name.substr(4, dot - 4);
  if (index.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const std::string rest = name.substr(dot + 1);
  for (const auto& [g, hf] : layer)
    if (rest == g) return "model.layers." + index + "." + hf;
  return std::nullopt;
}

at::ScalarType plain_dtype(uint32_t type) {
  switch (static_cast<io::GgmlType>(type)) {
    case io::GgmlType::F32:
      return at::kFloat;
    case io::GgmlType::F16:
      return at::kHalf;
    case io::GgmlType::BF16:
      return at::kBFloat16;
    default:
      return at::kByte;  // quantized: no plain dtype
  }
}

at::Tensor load_tensor(const io::GgufFile& g, const io::GgufTensorInfo& info) {
  const at::ScalarType dt = plain_dtype(info.type);
  if (dt != at::kByte) return io::view_tensor(g.file, info.offset, dt, info.shape());
  return io::gguf_tensor_f32(g, info);
}

// A 2-D tensor of a block type as uint8 [rows, row bytes] over the mapped file.
at::Tensor block_rows(const io::GgufFile& g, const io::GgufTensorInfo& info) {
  const auto row_bytes = static_cast<int64_t>(io::ggml_nbytes(info.type, info.ne[0]));
  return io::view_tensor(g.file, info.offset, at::kByte, {info.ne[1], row_bytes});
}

bool is_qk(const std::string& hf, const char* proj) {
  const std::string w = std::string("self_attn.") + proj + ".";
  return hf.find(w) != std::string::npos;
}

}  // namespace

model::ModelConfig gguf_model_config(const io::GgufHeader& h) {
  const std::string& arch = h.at("general.architecture").as_string("general.architecture");
  check(arch == "llama" || arch == "qwen2", k_op,
        "general.architecture '{}' is not supported (expected llama or qwen2)", arch);
  const Keys k{h, arch};
  model::ModelConfig c;
  c.architecture = arch == "llama" ? "LlamaForCausalLM" : "Qwen2ForCausalLM";
  c.num_layers = k.integer("block_count");
  c.hidden_size = k.integer("embedding_length");
  c.intermediate_size = k.integer("feed_forward_length");
  c.num_heads = k.integer("attention.head_count");
  c.num_kv_heads = k.integer_or("attention.head_count_kv", c.num_heads);
  for (auto [v, key] : {std::pair{c.num_layers, "block_count"},
                        {c.hidden_size, "embedding_length"},
                        {c.intermediate_size, "feed_forward_length"},
                        {c.num_heads, "attention.head_count"},
                        {c.num_kv_heads, "attention.head_count_kv"}})
    check_positive(v, arch + "." + key);
  check(c.num_heads % c.num_kv_heads == 0, k_op, "{} query heads are not a multiple of {} KV heads",
        c.num_heads, c.num_kv_heads);
  c.head_dim = k.integer_or("attention.key_length", c.hidden_size / c.num_heads);
  check_positive(c.head_dim, arch + ".attention.key_length");
  check(c.head_dim % 2 == 0, k_op, "head_dim {} must be even (rotary pairs)", c.head_dim);
  check(k.integer_or("attention.value_length", c.head_dim) == c.head_dim, k_op,
        "{}.attention.value_length differs from key_length: not supported", arch);
  c.rope_freq_factors = rope_factors_from_metadata(k, c.head_dim);
  c.rope_theta = k.number_or("rope.freq_base", 10000.0);
  c.rms_norm_eps = k.number_or("attention.layer_norm_rms_epsilon", 1e-5);
  check(c.rope_theta > 0 && c.rms_norm_eps > 0, k_op,
        "rope.freq_base and layer_norm_rms_epsilon must be positive");
  c.max_position_embeddings = k.integer_or("context_length", 2048);
  int64_t vocab = 0;
  if (const io::GgufValue* t = h.find("tokenizer.ggml.tokens"))
    vocab = static_cast<int64_t>(t->as_array("tokenizer.ggml.tokens").size());
  c.vocab_size = k.integer_or("vocab_size", vocab);
  if (const io::GgufTensorInfo* e = h.find_tensor("token_embd.weight"); e && c.vocab_size == 0)
    c.vocab_size = e->ne.size() == 2 ? e->ne[1] : 0;
  check_positive(c.vocab_size, arch + ".vocab_size");
  c.tie_word_embeddings = h.find_tensor("output.weight") == nullptr;
  c.attention_bias = h.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.rope_style = model::RopeStyle::half;  // after unpermute_llama_qk for llama
  c.bos_token_id = token_id(h, "tokenizer.ggml.bos_token_id");
  c.eos_token_id = token_id(h, "tokenizer.ggml.eos_token_id");
  if (c.eos_token_id) c.eos_token_ids = {*c.eos_token_id};
  return c;
}

at::Tensor unpermute_llama_qk(const at::Tensor& rows, int64_t heads) {
  const int64_t n = rows.size(0);
  check(heads > 0 && n % (2 * heads) == 0, k_op, "Q/K rows {} are not 2 × a multiple of {} heads",
        n, heads);
  std::vector<int64_t> view = {heads, n / heads / 2, 2};
  for (int64_t d = 1; d < rows.dim(); ++d) view.push_back(rows.size(d));
  return rows.reshape(view).transpose(1, 2).contiguous().reshape(rows.sizes());
}

namespace {

// rope_freqs.weight: F32 [head_dim / 2], the divisor of each pair's frequency (llama.cpp's
// converter writes it for Llama-3 rope_scaling), exclusive with rope.scaling.type linear.
std::vector<double> rope_freqs_of(const io::GgufFile& g, const io::GgufTensorInfo& info,
                                  const model::ModelConfig& c) {
  check(c.rope_freq_factors.empty(), k_op,
        "{} and rope.scaling.type both scale RoPE: a model scales it one way", k_rope_freqs);
  check(info.ne.size() == 1 && info.ne[0] == c.head_dim / 2, k_op,
        "{} has {} elements in {} dims: expected one factor per rotary pair ({})", k_rope_freqs,
        info.ne.empty() ? 0 : info.ne[0], info.ne.size(), c.head_dim / 2);
  const at::Tensor t = load_tensor(g, info).to(at::kDouble).contiguous();
  std::vector<double> f(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  for (size_t i = 0; i < f.size(); ++i)
    check(std::isfinite(f[i]) && f[i] > 0, k_op, "{}[{}] = {}: expected a finite factor > 0",
          k_rope_freqs, i, f[i]);
  return f;
}

}  // namespace

model::ModelWeights load_gguf_model(const std::filesystem::path& path, bool keep_quantized) {
  return gguf_model_weights(io::read_gguf(path), keep_quantized);
}

model::ModelWeights gguf_model_weights(const io::GgufFile& g, bool keep_quantized) {
  const std::string path = g.file ? g.file->path().string() : std::string("<gguf>");
  model::ModelWeights w;
  w.config = gguf_model_config(g.header);
  const bool llama = w.config.architecture == "LlamaForCausalLM";
  for (const auto& info : g.header.tensors) {
    if (info.name == k_rope_freqs) {
      w.config.rope_freq_factors = rope_freqs_of(g, info, w.config);
      continue;
    }
    const auto name = hf_name(info.name);
    check(name.has_value(), k_op,
          "{}: tensor '{}' is not part of a llama/qwen2 model this loader knows", path, info.name);
    // Matrices of a block type stay quantized; 1-D ones (none in llama.cpp's files) decode.
    const bool quantized = plain_dtype(info.type) == at::kByte && info.ne.size() == 2;
    at::Tensor t = keep_quantized && quantized ? block_rows(g, info) : load_tensor(g, info);
    if (llama && is_qk(*name, "q_proj")) t = unpermute_llama_qk(t, w.config.num_heads);
    if (llama && is_qk(*name, "k_proj")) t = unpermute_llama_qk(t, w.config.num_kv_heads);
    if (keep_quantized && quantized)
      w.quantized[*name] =
          model::make_quant_weight(info.type, info.ne[1], info.ne[0], t, info.name);
    else
      w.tensors[*name] = t;
  }
  validate_weights(w, path);
  return w;
}

}  // namespace oal::formats
