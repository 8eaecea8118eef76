#pragma once
// Loading a checkpoint into ModelWeights (HF tensor names, dtype as stored).
//
// `path` may be
//   * an HF model directory: config.json + model.safetensors, or sharded files listed
//     in model.safetensors.index.json ("weight_map": tensor name → file name);
//   * a file inside such a directory (config.json or a .safetensors file);
//   * a GGUF file (llama/qwen2; quantized tensors dequantized to fp32, or kept as
//     stored with LoadOptions::keep_quantized), see gguf_model.h;
//   * a llama2.c legacy checkpoint (.bin), see llama2c.h.
// Every tensor the config implies must be present with the implied shape and dtype
// F32, BF16 or F16; unexpected tensors are errors, except rotary_emb.inv_freq buffers
// (dropped) and an lm_head.weight stored beside tied embeddings (dropped: the
// embedding is the classifier). Safetensors tensors are zero-copy views of
// memory-mapped files; see io/safetensors.h.
#include <filesystem>
#include <string>

#include "oal/model/weights.h"

namespace oal::formats {

struct LoadOptions {
  // GGUF only: keep tensors of a ggml block type (Q8_0, Q4_1, Q4_K, ...) as stored, in
  // ModelWeights::quantized, instead of dequantizing them to fp32. For inference
  // (Transformer with WeightFormat auto/stored); analysis and training want fp32.
  bool keep_quantized = false;
};

model::ModelWeights load_model(const std::string& path, LoadOptions options = {});

// An HF directory (config.json + model.safetensors or an index with shards).
model::ModelWeights load_hf_dir(const std::filesystem::path& dir);

}  // namespace oal::formats
