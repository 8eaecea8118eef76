#pragma once
// Loading any model path for inference, converted directories included (what
// `oal convert` / `oal finetune` export, convert/convert.h). Inference (`oal ppl`,
// `generate`, `eval`, `serve`) needs only this and the attention level's method store,
// not calibration.
//
// Converted directory (an HF model directory):
//   config.json         HF config + "oal_conversion": {"format": "oal-converted",
//                       "version": 1, "method", "layers", "source_model",
//                       "model_fingerprint"} (+ "oal_rope_style": "adjacent" for
//                       llama2.c-layout models)
//   model.safetensors   backbone weights (LoRA merged into q/k/v/o when adapted)
//   oal_attention/      the converted layers' methods (attention/method_store.h)
//   tokenizer file      copied from the source (tokenizer.json, tok512.bin, ...)
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oal/attention/method_store.h"
#include "oal/formats/load.h"
#include "oal/model/transformer.h"
#include "oal/model/weights.h"

namespace oal::formats {

// config.json's key that marks a converted directory, and its methods' subdirectory.
inline constexpr const char* k_conversion_marker = "oal_conversion";
inline constexpr const char* k_converted_attention_dir = "oal_attention";

// What a converted directory's "oal_conversion" marker records.
struct Conversion {
  std::string method;              // the converted layers' method (registry name)
  std::vector<int64_t> layers;     // the converted layers
  std::string model_fingerprint;   // formats/fingerprint.h of the backbone it was made for
};

// The marker of `path` when it is a converted directory (its config.json has
// "oal_conversion"), nullopt for any other path. Throws oal::Error("[convert] ...") for
// a malformed marker. The fingerprint is not compared here (the weights are not read).
std::optional<Conversion> read_conversion(const std::filesystem::path& path);

// Checks, before any work, that `store` can give `layers` of the model `weights` the
// method `method`: the store holds the method, every layer is stored and < num_layers,
// and each stored layer's shape (query heads, KV heads, head_dim) equals the model's. A
// "model_fingerprint" in the manifest (formats/fingerprint.h) must equal the model's.
// Throws oal::Error("[convert] ...") naming the mismatch.
void validate_stored_methods(const attn::MethodStore& store, const model::ModelWeights& weights,
                             const std::string& method, const std::vector<int64_t>& layers);

// Loads any model path: a converted directory builds its hybrid attention, anything
// else loads as load_model() does. Weights are moved to `device`; quantized GGUF tensors
// stay quantized on the CPU (Transformer converts them as options.weights asks).
std::unique_ptr<model::Transformer> load_transformer(const std::string& path,
                                                     model::TransformerOptions options = {},
                                                     at::Device device = at::kCPU);

// The same for `weights` already loaded from `path` (open_model reads a GGUF once for
// its weights, tokenizer and chat template). config.json is read once, and the
// fingerprint computed once, for a converted directory.
std::unique_ptr<model::Transformer> build_transformer(model::ModelWeights weights,
                                                      const std::string& path,
                                                      model::TransformerOptions options = {},
                                                      at::Device device = at::kCPU);

}  // namespace oal::formats
