#pragma once
// Architecture of a Llama / Qwen2 decoder-only model, read from an HF config.json or
// a llama2.c header. All weights use Hugging Face tensor names (see weights.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace oal::model {

// How RoPE pairs the dimensions of a head.
//   half:     (i, i + D/2) — Hugging Face Llama/Qwen2 layout.
//   adjacent: (2i, 2i + 1) — llama2.c (run.c) layout.
enum class RopeStyle { half, adjacent };

// Llama-3 rope_scaling (rope_type "llama3").
struct RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string architecture;  // "LlamaForCausalLM" | "Qwen2ForCausalLM"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;       // query heads
  int64_t num_kv_heads = 0;    // key/value heads; num_heads % num_kv_heads == 0
  int64_t head_dim = 0;        // hidden_size / num_heads unless config says otherwise
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool attention_bias = false;  // q/k/v biases (Qwen2)
  bool tie_word_embeddings = false;
  RopeStyle rope_style = RopeStyle::half;
  std::optional<RopeScaling> rope_scaling;
  // Per-pair divisors of the RoPE frequencies as a GGUF file stores them (llama.cpp's
  // rope_freqs.weight, or rope.scaling.type linear): pair i turns at theta^(-2i/D) /
  // rope_freq_factors[i]. [head_dim / 2] or empty (none); never set with rope_scaling.
  std::vector<double> rope_freq_factors;
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> eos_token_id;   // the first end-of-sequence id
  std::vector<int64_t> eos_token_ids;    // all of them (HF configs may list several)
};

}  // namespace oal::model
