#pragma once
// Loads a model path as the CLI does (any format, converted directories included) and
// runs one forward over two tokens, so weights that load but do not fit together fail
// with an error instead of reading out of bounds.
#include <ATen/ATen.h>

#include <string>

#include "oal/convert/convert.h"

namespace oal::fuzz {

inline void load_and_run_model(const std::string& path) {
  const auto model = convert::load_transformer(path);
  (void)model->forward(at::zeros({1, 2}, at::kLong));
}

}  // namespace oal::fuzz
