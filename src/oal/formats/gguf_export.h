#pragma once
// Writes ModelWeights as a llama.cpp GGUF file ("llama" or "qwen2" architecture, F32,
// F16 or Q8_0 matrices; norms and biases F32): the inverse of gguf_model.h, with llama.cpp's names,
// metadata and, for llama, its Q/K row permutation. Used by tests (a round trip through the loader)
// and the fuzz seeds; llama.cpp reads the result.
#include <filesystem>

#include "oal/io/gguf_writer.h"
#include "oal/model/weights.h"

namespace oal::formats {

// The metadata and tensors of `weights` (matrices stored as `type`: io::GgmlType::F32,
// F16 or Q8_0; a matrix whose rows are not whole blocks of 32 as F16),
// followed by `extra` (e.g. tokenizer.ggml.* keys).
std::pair<io::GgufMetadata, std::vector<io::GgufTensorData>> gguf_model_parts(
    const model::ModelWeights& weights, uint32_t type, const io::GgufMetadata& extra = {});

void write_gguf_model(const std::filesystem::path& path, const model::ModelWeights& weights,
                      uint32_t type, const io::GgufMetadata& extra = {});

// llama.cpp's permutation of Q/K rows for `heads` heads (HF order → file order).
at::Tensor permute_llama_qk(const at::Tensor& rows, int64_t heads);

}  // namespace oal::formats
