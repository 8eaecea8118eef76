#pragma once
// How a Transformer holds its projection and embedding weights (`--weights`):
//
//   auto    quantized tensors (GGUF loaded with LoadOptions::keep_quantized) as stored,
//           float ones widened to fp32 once: the fastest on the CPU (default)
//   f32     everything fp32 (quantized tensors decoded once at construction)
//   stored  everything as loaded: bf16/fp16 kept (streamed by linear_quant's kernels when rows
//           are whole groups of 32, else widened per GEMM), quantized kept
//   bf16    float and quantized weights as bf16, streamed likewise (half of fp32's memory)
//   q8_0    every weight with in_features divisible by 32 as Q8_0 (8.5 bits per
//           weight), from whatever it was; the others stay fp32. A Q8_0 tensor is kept.
//
// Norms and biases are always fp32. Quantized weights run through
// simd/linear_quant.h (docs/quantized.md).
#include <ATen/ATen.h>

#include <string>

#include "oal/model/quant_weight.h"

namespace oal::model {

enum class WeightFormat { automatic, f32, stored, bf16, q8_0 };

// "auto" | "f32" | "stored" | "bf16" | "q8_0" → the format; anything else is an
// oal::Error("[weights] ...") listing them.
WeightFormat parse_weight_format(const std::string& name);
std::string weight_format_name(WeightFormat format);

// One weight [rows, cols] as `format` holds it: exactly one of the two is defined.
struct HeldWeight {
  at::Tensor dense;  // fp32, bf16 or fp16
  QuantWeight quant;
};

// The weight `name` given as a float tensor (`dense` defined) or a quantized one
// (`quant` defined), converted to `format`.
HeldWeight hold_weight(const at::Tensor& dense, const QuantWeight& quant, WeightFormat format,
                       const std::string& name);

}  // namespace oal::model
