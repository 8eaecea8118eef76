#pragma once
// A short identity of a model, stored by `oal calibrate` in calibration.json and by
// `oal convert` in a converted config.json, so that a calibration run or a converted
// directory is never applied to another model.
#include <string>

#include "oal/model/linear.h"
#include "oal/model/weights.h"

namespace oal::formats {

// "oal-<16 hex>": FNV-1a 64 over the architecture numbers (layers, heads, KV heads,
// head_dim, hidden, intermediate, vocab, rope) and the values (as fp32) of up to 256
// evenly spaced rows of the token embedding. The embedding is what LoRA and attention
// conversion leave untouched, so a converted or adapter-merged export keeps the
// fingerprint of its base model, while two checkpoints of one architecture differ.
// Throws oal::Error("model_fingerprint") when the embedding tensor is missing.
std::string model_fingerprint(const model::ModelWeights& weights);
// The same from a config and its token embedding [V, hidden] (e.g. a built Transformer's).
std::string model_fingerprint(const model::ModelConfig& config, const at::Tensor& embed_tokens);
// ... and from an embedding kept quantized (the same fingerprint as its dequantized copy).
std::string model_fingerprint(const model::ModelConfig& config,
                              const model::QuantWeight& embed_tokens);
// ... and from a Transformer's embedding table, dense or quantized.
std::string model_fingerprint(const model::ModelConfig& config, const model::Linear& embed_tokens);

}  // namespace oal::formats
