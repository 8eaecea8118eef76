#pragma once
// Llama and Qwen2 models from a GGUF file (llama.cpp's format), mapped onto the same
// ModelWeights as an HF checkpoint: HF tensor names, [out, in] linear weights, RoPE in
// the HF half layout.
//
// Config from the metadata ({arch} = general.architecture, "llama" or "qwen2"):
//   {arch}.block_count, .embedding_length, .feed_forward_length, .attention.head_count,
//   .attention.head_count_kv (default: head_count), .attention.key_length (default:
//   embedding / heads; must equal .rope.dimension_count: partial rotary is refused),
//   .rope.freq_base (default 10000), .attention.layer_norm_rms_epsilon, .context_length,
//   .vocab_size (default: the tokenizer's token count), rope scaling type none only;
//   tied output when output.weight is absent; q/k/v biases (Qwen2) when present;
//   bos/eos ids from tokenizer.ggml.{bos,eos}_token_id.
//
// Q and K rows: llama.cpp's converter permutes them for "llama" (its rotary pairs
// adjacent dimensions): within each head, HF row p·d/2 + i is stored at row 2i + p. They
// are permuted back here, so dimension r of a head means what it means in the HF
// checkpoint (analyses, groups and the official coefficients are indexed that way).
// "qwen2" files are stored in HF order (llama.cpp's NEOX rotary) and kept.
//
// Tensors: F32/F16/BF16 are zero-copy views of the mapped file (Q/K of llama copied by
// the permutation); quantized types are dequantized to fp32 at load, or, with
// keep_quantized, kept as stored in ModelWeights::quantized (zero-copy views too; the
// Q/K row permutation moves whole rows of blocks).
#include <filesystem>

#include "oal/io/gguf.h"
#include "oal/model/weights.h"

namespace oal::formats {

// The architecture the metadata describes. Throws "[gguf model] ..." naming the key.
model::ModelConfig gguf_model_config(const io::GgufHeader& header);

// Loads every tensor of a llama/qwen2 GGUF file (validated as load_model does).
model::ModelWeights load_gguf_model(const std::filesystem::path& path, bool keep_quantized = false);

// The same from a file already read (open_model reads a GGUF once for its weights,
// tokenizer and chat template). The tensors keep `gguf.file` mapped.
model::ModelWeights gguf_model_weights(const io::GgufFile& gguf, bool keep_quantized = false);

// The inverse of llama.cpp's Q/K row permutation for `heads` heads: rows [H·d, in] in
// the file's order → HF order (see above). Exposed for tests.
at::Tensor unpermute_llama_qk(const at::Tensor& rows, int64_t heads);

}  // namespace oal::formats
