#pragma once
// Karpathy's llama2.c legacy checkpoint (run.c "version 0"): 7 × int32 header
// (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative
// vocab_size means an untied classifier), then fp32 weights:
//   token_embedding [vocab, dim], rms_att [L, dim], wq [L, dim, dim],
//   wk [L, kv_dim, dim], wv [L, kv_dim, dim], wo [L, dim, dim], rms_ffn [L, dim],
//   w1 [L, hidden, dim], w2 [L, dim, hidden], w3 [L, hidden, dim], rms_final [dim],
//   a legacy RoPE table (seq_len × head_dim floats, skipped),
//   wcls [vocab, dim] only when untied.
// Mapped onto HF names (w1 = gate_proj, w2 = down_proj, w3 = up_proj) with
// rope_style adjacent, rms_norm_eps 1e-5, rope_theta 10000, tied when vocab > 0,
// max_position_embeddings = seq_len, bos 1 / eos 2 (llama2.c tokenizer). Tensors are
// zero-copy views into a copy-on-write memory map of the file.
#include <cstdint>
#include <filesystem>

#include "oal/model/weights.h"

namespace oal::formats {

struct Llama2cHeader {
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0,
          seq_len = 0;
};

// Exact file size in bytes that `h` implies; throws for an inconsistent header.
uint64_t llama2c_expected_size(const Llama2cHeader& h, const std::string& source);

// ModelConfig for a header (see the mapping above).
model::ModelConfig llama2c_config(const Llama2cHeader& h);

// Loads a legacy llama2.c checkpoint. The file must be exactly the size its header
// implies (truncated or padded files are errors).
model::ModelWeights load_llama2c(const std::filesystem::path& path);

}  // namespace oal::formats
