#include "oal/formats/fingerprint.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "oal/core/error.h"
#include "oal/core/fnv1a.h"
#include "oal/model/rope.h"

namespace oal::formats {
namespace {

constexpr int64_t k_sample_rows = 256;

// The sampled rows' indices for an embedding of `rows` rows: evenly spaced.
at::Tensor sample_rows(int64_t rows) {
  const int64_t n = std::min(rows, k_sample_rows);
  return at::linspace(0, static_cast<double>(std::max<int64_t>(rows - 1, 0)), n,
                      at::TensorOptions().dtype(at::kDouble))
      .round()
      .to(at::kLong);
}

// sample: the sampled rows as fp32 [n, hidden] (a bf16, fp32 or quantized copy of one
// model agree as long as their values do).
std::string fingerprint_of(const model::ModelConfig& c, const at::Tensor& sample) {
  const std::string arch = fmt::format(
      "{}|L{}|H{}|KV{}|D{}|h{}|f{}|V{}|rope{}:{}|tie{}", c.architecture, c.num_layers, c.num_heads,
      c.num_kv_heads, c.head_dim, c.hidden_size, c.intermediate_size, c.vocab_size, c.rope_theta,
      c.rope_style == model::RopeStyle::half ? "half" : "adjacent", c.tie_word_embeddings);
  uint64_t h = k_fnv1a_offset;
  fnv1a(h, arch);
  // Scaled RoPE enters as its effective divisors, so an HF Llama-3 model (rope_scaling)
  // and its GGUF copy (rope_freqs.weight) agree; 6 digits absorb the file's fp32 rounding.
  // Unscaled models hash exactly as before this term existed.
  if (const std::vector<double> f = model::rope_freq_divisors(c); !f.empty())
    for (double d : f) fnv1a(h, fmt::format("|r{:.6g}", d));
  fnv1a(h, sample.data_ptr<float>(), static_cast<size_t>(sample.numel()) * sizeof(float));
  return fmt::format("oal-{:016x}", h);
}

}  // namespace

std::string model_fingerprint(const model::ModelWeights& w) {
  const std::string name = "model.embed_tokens.weight";
  if (auto q = w.quantized.find(name); q != w.quantized.end())
    return model_fingerprint(w.config, q->second);
  const auto it = w.tensors.find(name);
  check(it != w.tensors.end() && it->second.dim() == 2, "model_fingerprint",
        "the model has no 2-D 'model.embed_tokens.weight' to fingerprint");
  return model_fingerprint(w.config, it->second);
}

std::string model_fingerprint(const model::ModelConfig& c, const at::Tensor& emb) {
  check(emb.defined() && emb.dim() == 2, "model_fingerprint", "the token embedding must be 2-D");
  const at::Tensor idx = sample_rows(emb.size(0));
  return fingerprint_of(c,
                        emb.detach().to(at::kCPU).index_select(0, idx).to(at::kFloat).contiguous());
}

std::string model_fingerprint(const model::ModelConfig& c, const model::Linear& emb) {
  return emb.quant.defined() ? model_fingerprint(c, emb.quant) : model_fingerprint(c, emb.weight);
}

std::string model_fingerprint(const model::ModelConfig& c, const model::QuantWeight& emb) {
  return fingerprint_of(c, emb.dequantize_rows(sample_rows(emb.rows)));
}

}  // namespace oal::formats
