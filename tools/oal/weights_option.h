#pragma once
// --weights auto|f32|stored|bf16|q8_0 (how a model's weights are held; model/weight_format.h)
// and its older spelling --keep-dtype (= --weights stored), shared by generate, ppl,
// serve and bench --model.
#include <CLI/CLI.hpp>

#include "oal/model/transformer.h"

namespace oal::cli {

inline void add_weights_option(CLI::App& app, model::TransformerOptions& o) {
  app.add_option_function<std::string>(
         "--weights", [&o](const std::string& name) { o.weights = model::parse_weight_format(name); },
         "How weights are held: auto = quantized GGUF tensors as stored (Q4_1, Q8_0, ... run by "
         "the quantized kernels), float ones as fp32; f32 = all fp32; stored = bf16/f16 kept too "
         "(widened per GEMM); bf16; q8_0 = convert to Q8_0 (8.5 bits per weight)")
      ->check(CLI::IsMember({"auto", "f32", "stored", "bf16", "q8_0"}))
      ->default_str("auto");
  app.add_flag_callback(
      "--keep-dtype", [&o] { o.weights = model::WeightFormat::stored; },
      "Same as --weights stored (kept for older scripts)");
}

}  // namespace oal::cli
