#pragma once
// Loads a model path as the CLI does (any format, converted directories included) and
// runs forwards over 2 and 9 tokens (a quantized GGUF tensor: the decode pass and the
// prefill panels), so weights that load but do not fit together fail with an error
// instead of reading out of bounds; then once more with every weight decoded to fp32.
#include <ATen/ATen.h>

#include <string>

#include "oal/formats/converted.h"

namespace oal::fuzz {

inline void load_and_run_model(const std::string& path) {
  const auto model = formats::load_transformer(path);
  (void)model->forward(at::zeros({1, 2}, at::kLong));
  (void)model->forward(at::zeros({1, 9}, at::kLong));
  const auto dense = formats::load_transformer(path, {.weights = model::WeightFormat::f32});
  (void)dense->forward(at::zeros({1, 2}, at::kLong));
}

}  // namespace oal::fuzz
