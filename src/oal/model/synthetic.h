#pragma once
// Deterministic small Llama / Qwen2-shaped checkpoints with planted outlier query/key
// dimensions, written as a real HF model directory:
//   config.json (+ "oal_synthetic": {"seed", "planted_dims", "planted_scale", ...}),
//   model.safetensors or model-0000i-of-0000k.safetensors + model.safetensors.index.json,
//   tokenizer.json + tokenizer_config.json (byte-level BPE, see synthetic_tokenizer.h).
// Same options (including seed) → byte-identical files on any machine: values come
// from a counter-based generator keyed by (seed, tensor name), not from LibTorch's RNG.
//
// Weights (fp32 before an optional bf16 rounding; h = hidden, f = intermediate):
//   token embeddings  g + u          g ~ N(0, 1) per entry, u = sqrt(h)·û, û a unit
//                                     vector shared by all tokens (the common direction)
//   norms             1 + 0.1·N(0, 1)
//   q/k/v, gate/up, lm_head   N(0, 1/h);  o_proj N(0, 0.25/(heads·head_dim));
//   down_proj N(0, 0.25/f);  q/k/v biases (Qwen2) N(0, 0.01)
//   planted rows      for each layer, `planted_pairs` RoPE pairs (i, i + head_dim/2)
//                     (HF half layout) chosen among the low-frequency half
//                     i ∈ [head_dim/4, head_dim/2); in every query head and every KV
//                     head those rows of W_q and W_k become
//                     planted_scale · (0.8·û + 0.6·N(0, 1/h)):
//                     since every normalised hidden state has a large positive
//                     component along û, the planted q_r and k_r are consistently
//                     positive and large, so q_r·k_r dominates the score — the
//                     outlier-dimension pattern OAL is built around.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "oal/model/weights.h"

namespace oal::model {

enum class SyntheticArch { llama, qwen2 };

struct SyntheticOptions {
  SyntheticArch architecture = SyntheticArch::llama;  // qwen2: q/k/v biases
  int64_t hidden_size = 64;
  int64_t intermediate_size = 128;
  int64_t num_layers = 2;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 2;
  int64_t head_dim = 0;             // 0: hidden_size / num_heads
  int64_t vocab_size = 0;           // 0: the synthetic tokenizer's size; else >= it
  int64_t max_position_embeddings = 512;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  // Llama-3 rope_scaling: factor 8, low 1, high 4,
  // original_max_position_embeddings = max_position_embeddings / 4.
  bool llama3_rope_scaling = false;
  int64_t planted_pairs = 1;        // RoPE pairs per layer (2 dims each); 0: none
  double planted_scale = 1.0;
  at::ScalarType dtype = at::kFloat;  // kFloat or kBFloat16
  int64_t shards = 1;               // > 1: sharded safetensors + index
  uint64_t seed = 0;
};

// Qwen2.5-0.5B's shapes (24 layers, hidden 896, 14 query / 2 KV heads of 64, vocab
// 151936, tied embeddings; 494M parameters) in bf16 with random weights: for speed and
// cost measurements at model scale, which depend on shapes only.
SyntheticOptions qwen25_05b_shape();

// The config and tensors (in options.dtype) the generator produces, without writing.
ModelWeights make_synthetic_weights(const SyntheticOptions& options);

// Planted head-dimension indices per layer (sorted; both halves of each RoPE pair).
std::vector<std::vector<int64_t>> synthetic_planted_dims(const SyntheticOptions& options);

// Writes the HF directory `dir` (created if needed; existing files of the same names
// are replaced atomically, one by one).
void write_synthetic_model(const std::filesystem::path& dir, const SyntheticOptions& options);

// Planted dims recorded in an HF directory's config.json under "oal_synthetic", or
// an empty vector when the model is not synthetic.
std::vector<std::vector<int64_t>> read_planted_dims(const std::filesystem::path& dir);

}  // namespace oal::model
