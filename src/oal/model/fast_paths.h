#pragma once
// Which code a built model runs, op by op, and why (after ggml's one supports_op per
// backend): the answer each op's own predicate gives for inference inputs — fp32
// activations on the CPU with autograd off — from what the op holds: a projection's
// weight format (Linear::cpu_path), a layer's readiness for the row decode step
// (decode_layer_blocker), an attention method's options and parameters
// (AttentionMethod::cpu_path). `oal info` prints the list and `oal info --json` /
// `oal bench --json` carry it, so a slow path is visible with its reason.
#include <cstdint>
#include <string>
#include <vector>

#include "oal/attention/simd_path.h"
#include "oal/model/transformer.h"

namespace oal::model {

struct FastPath {
  // "attention", "decode step", "lm_head", or the projections that share the path
  // ("q_proj, k_proj, v_proj").
  std::string op;
  std::vector<int64_t> layers;  // ascending; empty for a model-wide op (lm_head)
  attn::PathChoice path;
};

// The model's paths, each (op, path) once with the layers it holds for, in the order
// projections, decode step, attention, lm_head. Read under a NoGradGuard (inference).
std::vector<FastPath> fast_paths(const Transformer& model);

}  // namespace oal::model
