#include "oal/model/fingerprint.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "oal/core/error.h"
#include "oal/core/fnv1a.h"

namespace oal::model {
namespace {

constexpr int64_t k_sample_rows = 256;

}  // namespace

std::string model_fingerprint(const ModelWeights& w) {
  const auto it = w.tensors.find("model.embed_tokens.weight");
  check(it != w.tensors.end() && it->second.dim() == 2, "model_fingerprint",
        "the model has no 2-D 'model.embed_tokens.weight' to fingerprint");
  return model_fingerprint(w.config, it->second);
}

std::string model_fingerprint(const ModelConfig& c, const at::Tensor& emb) {
  check(emb.defined() && emb.dim() == 2, "model_fingerprint", "the token embedding must be 2-D");
  const std::string arch = fmt::format(
      "{}|L{}|H{}|KV{}|D{}|h{}|f{}|V{}|rope{}:{}|tie{}", c.architecture, c.num_layers, c.num_heads,
      c.num_kv_heads, c.head_dim, c.hidden_size, c.intermediate_size, c.vocab_size, c.rope_theta,
      c.rope_style == RopeStyle::half ? "half" : "adjacent", c.tie_word_embeddings);
  uint64_t h = k_fnv1a_offset;
  fnv1a(h, arch);
  const int64_t rows = emb.size(0), n = std::min(rows, k_sample_rows);
  // Evenly spaced rows, fp32 values (a bf16 and an fp32 copy of one model agree).
  auto idx = at::linspace(0, static_cast<double>(std::max<int64_t>(rows - 1, 0)), n,
                          at::TensorOptions().dtype(at::kDouble))
                 .round()
                 .to(at::kLong);
  const at::Tensor sample =
      emb.detach().to(at::kCPU).index_select(0, idx).to(at::kFloat).contiguous();
  fnv1a(h, sample.data_ptr<float>(), static_cast<size_t>(sample.numel()) * sizeof(float));
  return fmt::format("oal-{:016x}", h);
}

}  // namespace oal::model
