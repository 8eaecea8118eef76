#pragma once
// One decoder layer for M rows of one token each — a decode step of a batch, or of a
// server's continuous batch — on raw fp32 rows: the arithmetic of Transformer's layer
// (transformer.h) without its ~35 tensor operations per layer. Each of those costs
// microseconds of dispatch and allocation on a 576-wide row; over SmolLM2's 30 layers
// they were about a third of a decode step (docs/quantized.md, "The decode step").
//
// The tensor layer stays the reference (TransformerOptions::rowwise_decode = false runs
// it) and runs everything this path does not take: autograd, adapters (LoRA), weights
// held as bf16/fp16, other devices, observers.
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "oal/model/config.h"
#include "oal/model/rope.h"
#include "oal/model/transformer.h"

namespace oal::model {

// Why decode_layer cannot run layer L whatever its input ("" when it can): both norms
// contiguous fp32 on the CPU without autograd, every projection Linear::simd_ready()
// (the first that is not is named with its reason).
std::string decode_layer_blocker(const TransformerLayer& L);
// Whether decode_layer can run layer L on x: x fp32 on the CPU without autograd, and
// decode_layer_blocker(L) empty.
bool decode_layer_can_run(const TransformerLayer& L, const at::Tensor& x);

// The layer's attention of the M rows: q [M, Hq, 1, D], k [M, Hkv, 1, D],
// v [M, Hkv, 1, D] fp32 (q and k rotated) → y [M, Hq, 1, Dv] fp32.
using AttendRows =
    std::function<at::Tensor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v)>;

// x [M, hidden] fp32, row r a token at position positions[r] (positions.size() == M) →
// the layer's output [M, hidden] fp32 (a new tensor; x is not changed). Requires
// decode_layer_can_run(L, x). Throws oal::Error("[decode layer] ...") on a shape that
// does not match the config.
at::Tensor decode_layer(const TransformerLayer& L, const ModelConfig& c, const Rope& rope,
                        const at::Tensor& x, const std::vector<int64_t>& positions,
                        const AttendRows& attend);

}  // namespace oal::model
