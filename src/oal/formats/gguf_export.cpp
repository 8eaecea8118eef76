#include "oal/formats/gguf_export.h"

#include <cstring>

#include "oal/core/error.h"
#include "oal/io/gguf_quants.h"
#include "oal/model/rope.h"

namespace oal::formats {
namespace {

constexpr std::string_view k_op = "gguf export";

// HF name → llama.cpp name (the table of gguf_model.cpp read backwards).
std::string gguf_name(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  static const std::vector<std::pair<std::string, std::string>> layer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}};
  const std::string prefix = "model.layers.";
  check(hf.rfind(prefix, 0) == 0, k_op, "tensor '{}' has no GGUF name", hf);
  const size_t dot = hf.find('.', prefix.size());
  const std::string rest = hf.substr(dot + 1);
  for (const auto& [h, g] : layer)
    if (rest == h) return "blk." + hf.substr(prefix.size(), dot - prefix.size()) + "." + g;
  fail(k_op, "tensor '{}' has no GGUF name", hf);
}

constexpr uint32_t k_q8_0 = static_cast<uint32_t>(io::GgmlType::Q8_0);

std::string tensor_bytes(const at::Tensor& t, uint32_t type) {
  if (type == k_q8_0) {
    const at::Tensor f = t.to(at::kFloat).contiguous();
    std::string out(io::ggml_nbytes(type, f.numel()), '\0');
    io::quantize(type, f.data_ptr<float>(), f.numel(), reinterpret_cast<uint8_t*>(out.data()));
    return out;
  }
  check(type == static_cast<uint32_t>(io::GgmlType::F32) ||
            type == static_cast<uint32_t>(io::GgmlType::F16),
        k_op, "only F32, F16 and Q8_0 tensors are written, not {}", io::ggml_type_name(type));
  const at::Tensor c = t.to(type == 0 ? at::kFloat : at::kHalf).contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

}  // namespace

at::Tensor permute_llama_qk(const at::Tensor& rows, int64_t heads) {
  const int64_t n = rows.size(0);
  check(heads > 0 && n % (2 * heads) == 0, k_op, "Q/K rows {} are not 2 × a multiple of {} heads",
        n, heads);
  std::vector<int64_t> view = {heads, 2, n / heads / 2};
  for (int64_t d = 1; d < rows.dim(); ++d) view.push_back(rows.size(d));
  return rows.reshape(view).transpose(1, 2).contiguous().reshape(rows.sizes());
}

std::pair<io::GgufMetadata, std::vector<io::GgufTensorData>> gguf_model_parts(
    const model::ModelWeights& w, uint32_t type, const io::GgufMetadata& extra) {
  const model::ModelConfig& c = w.config;
  const bool llama = c.architecture == "LlamaForCausalLM";
  check(llama || c.architecture == "Qwen2ForCausalLM", k_op,
        "architecture '{}' has no GGUF form here", c.architecture);
  check(c.rope_style == model::RopeStyle::half, k_op,
        "only HF-layout RoPE is written (llama2.c's adjacent pairs have no GGUF form here)");
  const std::string a = llama ? "llama" : "qwen2";
  io::GgufMetadata md = {
      {"general.architecture", io::gguf_str(a)},
      {a + ".block_count", io::gguf_u32(c.num_layers)},
      {a + ".context_length", io::gguf_u32(c.max_position_embeddings)},
      {a + ".embedding_length", io::gguf_u32(c.hidden_size)},
      {a + ".feed_forward_length", io::gguf_u32(c.intermediate_size)},
      {a + ".attention.head_count", io::gguf_u32(c.num_heads)},
      {a + ".attention.head_count_kv", io::gguf_u32(c.num_kv_heads)},
      {a + ".attention.key_length", io::gguf_u32(c.head_dim)},
      {a + ".attention.value_length", io::gguf_u32(c.head_dim)},
      {a + ".rope.dimension_count", io::gguf_u32(c.head_dim)},
      {a + ".rope.freq_base", io::gguf_f32(static_cast<float>(c.rope_theta))},
      {a + ".attention.layer_norm_rms_epsilon", io::gguf_f32(static_cast<float>(c.rms_norm_eps))},
      {a + ".vocab_size", io::gguf_u32(c.vocab_size)},
  };
  md.insert(md.end(), extra.begin(), extra.end());
  std::vector<io::GgufTensorData> tensors;
  for (const auto& [name, t0] : w.tensors) {
    at::Tensor t = t0;
    if (llama && name.find("self_attn.q_proj.") != std::string::npos)
      t = permute_llama_qk(t, c.num_heads);
    if (llama && name.find("self_attn.k_proj.") != std::string::npos)
      t = permute_llama_qk(t, c.num_kv_heads);
    // Norms and biases stay F32, as llama.cpp's converter keeps 1-D tensors; a matrix
    // whose rows are not whole Q8_0 blocks stays F16, as llama.cpp's quantizer falls back.
    uint32_t tt = t.dim() == 1 ? static_cast<uint32_t>(io::GgmlType::F32) : type;
    if (tt == k_q8_0 && t.size(-1) % 32 != 0) tt = static_cast<uint32_t>(io::GgmlType::F16);
    tensors.push_back(
        {gguf_name(name), {t.sizes().rbegin(), t.sizes().rend()}, tt, tensor_bytes(t, tt)});
  }
  // RoPE scaling as llama.cpp's converter stores it: the per-pair divisors, F32.
  if (const std::vector<double> f = model::rope_freq_divisors(c); !f.empty()) {
    const at::Tensor t = at::tensor(f, at::kDouble).to(at::kFloat);
    const uint32_t f32 = static_cast<uint32_t>(io::GgmlType::F32);
    tensors.push_back({"rope_freqs.weight", {t.size(0)}, f32, tensor_bytes(t, f32)});
  }
  return {md, tensors};
}

void write_gguf_model(const std::filesystem::path& path, const model::ModelWeights& weights,
                      uint32_t type, const io::GgufMetadata& extra) {
  const auto [md, tensors] = gguf_model_parts(weights, type, extra);
  io::write_gguf(path, md, tensors);
}

}  // namespace oal::formats
