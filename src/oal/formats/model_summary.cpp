#include "oal/formats/model_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "oal/core/ranges.h"
#include "oal/formats/hf_config.h"
#include "oal/io/gguf_quants.h"
#include "oal/simd/isa.h"

namespace oal::formats {
namespace {

std::string human_bytes(int64_t b) {
  if (b >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / double(int64_t{1} << 30));
  if (b >= (int64_t{1} << 20)) return fmt::format("{:.2f} MiB", b / double(1 << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", b);
}

std::string human_count(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1'000) return fmt::format("{:.1f}K", n / 1e3);
  return std::to_string(n);
}

std::string rope_text(const model::ModelConfig& c) {
  std::string s = fmt::format("theta {} ({} pairs)", c.rope_theta,
                              c.rope_style == model::RopeStyle::half ? "half-split" : "adjacent");
  if (c.rope_scaling)
    s +=
        fmt::format(", llama3 scaling factor {} low {} high {} original {}", c.rope_scaling->factor,
                    c.rope_scaling->low_freq_factor, c.rope_scaling->high_freq_factor,
                    c.rope_scaling->original_max_position_embeddings);
  if (!c.rope_freq_factors.empty()) {
    const auto [lo, hi] =
        std::minmax_element(c.rope_freq_factors.begin(), c.rope_freq_factors.end());
    s += fmt::format(", frequencies divided by per-pair factors {}..{}", *lo, *hi);
  }
  return s;
}

}  // namespace

ModelSummary summarize(const model::ModelWeights& w) {
  ModelSummary s;
  s.config = w.config;
  for (const auto& [name, t] : w.tensors) {
    s.tensors += 1;
    s.parameters += t.numel();
    s.bytes += t.numel() * static_cast<int64_t>(t.element_size());
    s.dtype_params[std::string(c10::toString(t.scalar_type()))] += t.numel();
  }
  for (const auto& [name, q] : w.quantized) {  // ggml blocks, as the file stores them
    s.tensors += 1;
    s.parameters += q.rows * q.cols;
    s.bytes += q.bytes.numel();
    s.dtype_params[io::ggml_type_name(q.type)] += q.rows * q.cols;
  }
  return s;
}

std::string describe(const model::ModelWeights& w) {
  const ModelSummary s = summarize(w);
  const model::ModelConfig& c = s.config;
  std::string dtypes;
  for (const auto& [d, n] : s.dtype_params)
    dtypes += fmt::format("{}{} ({})", dtypes.empty() ? "" : ", ", d, human_count(n));
  std::string out;
  out += fmt::format("architecture      {}\n", c.architecture);
  out += fmt::format("layers            {}\n", c.num_layers);
  out += fmt::format("hidden / ffn      {} / {}\n", c.hidden_size, c.intermediate_size);
  out += fmt::format("heads / kv heads  {} / {} (head_dim {})\n", c.num_heads, c.num_kv_heads,
                     c.head_dim);
  out += fmt::format("vocab             {}{}\n", c.vocab_size,
                     c.tie_word_embeddings ? " (tied embeddings)" : "");
  out += fmt::format("max positions     {}\n", c.max_position_embeddings);
  out += fmt::format("rope              {}\n", rope_text(c));
  out += fmt::format("rms_norm_eps      {}\n", c.rms_norm_eps);
  out += fmt::format("attention bias    {}\n", c.attention_bias ? "yes" : "no");
  out += fmt::format("parameters        {} ({})\n", human_count(s.parameters), s.parameters);
  out += fmt::format("weights           {} in {} tensors; {}\n", human_bytes(s.bytes), s.tensors,
                     dtypes);
  return out;
}

nlohmann::json summary_json(const model::ModelWeights& w) {
  const ModelSummary s = summarize(w);
  const model::ModelConfig& c = s.config;
  nlohmann::json j = {{"architecture", c.architecture},
                      {"hidden_size", c.hidden_size},
                      {"intermediate_size", c.intermediate_size},
                      {"num_layers", c.num_layers},
                      {"num_heads", c.num_heads},
                      {"num_kv_heads", c.num_kv_heads},
                      {"head_dim", c.head_dim},
                      {"vocab_size", c.vocab_size},
                      {"max_position_embeddings", c.max_position_embeddings},
                      {"rope_theta", c.rope_theta},
                      {"rope_style", c.rope_style == model::RopeStyle::half ? "half" : "adjacent"},
                      {"rms_norm_eps", c.rms_norm_eps},
                      {"attention_bias", c.attention_bias},
                      {"tie_word_embeddings", c.tie_word_embeddings},
                      {"tensors", s.tensors},
                      {"parameters", s.parameters},
                      {"bytes", s.bytes},
                      {"dtypes", s.dtype_params}};
  if (c.rope_scaling) j["rope_scaling"] = rope_scaling_to_json(*c.rope_scaling);
  if (!c.rope_freq_factors.empty()) j["rope_freq_factors"] = c.rope_freq_factors;
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (!c.eos_token_ids.empty()) j["eos_token_ids"] = c.eos_token_ids;
  return j;
}

std::string describe_fast_paths(const std::vector<model::FastPath>& paths) {
  std::string out = fmt::format("fast paths        inference inputs (fp32 on the CPU, no autograd), "
                                "SIMD target {}\n",
                                simd::target_name(simd::active_target()));
  auto where = [](const model::FastPath& f) {
    return f.layers.empty() ? std::string() : "layers " + format_index_list(f.layers);
  };
  size_t op_width = 0, where_width = 0;
  for (const model::FastPath& f : paths) {
    op_width = std::max(op_width, f.op.size());
    where_width = std::max(where_width, where(f).size());
  }
  for (const model::FastPath& f : paths) {
    const std::string what = f.path.simd ? "simd: " + f.path.detail
                                         : "reference: " + f.path.detail + " — " + f.path.reason;
    out += fmt::format("  {:<{}}  {:<{}}  {}\n", f.op, op_width, where(f), where_width, what);
  }
  return out;
}

nlohmann::json fast_paths_json(const std::vector<model::FastPath>& paths) {
  nlohmann::json ops = nlohmann::json::array();
  for (const model::FastPath& f : paths)
    ops.push_back({{"op", f.op},
                   {"layers", f.layers},
                   {"layer_ranges", format_index_list(f.layers)},
                   {"path", f.path.simd ? "simd" : "reference"},
                   {"detail", f.path.detail},
                   {"reason", f.path.simd ? nlohmann::json(nullptr) : nlohmann::json(f.path.reason)}});
  return {{"simd_target", simd::target_name(simd::active_target())}, {"ops", ops}};
}

}  // namespace oal::formats
