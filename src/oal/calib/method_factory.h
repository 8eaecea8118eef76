#pragma once
// Building any method of the comparison by name for one layer, with its initial (or
// loaded) parameters.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/kernel_json.h"
#include "oal/attention/method.h"

namespace oal::calib {

struct MethodShape {
  int64_t layer = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
};

// "softmax"; "oal" / "global" from kernels->layer(layer) (global without kernels: Taylor
// 1 + s + s²/2 per head; oal without kernels: oal::Error); "taylorshift" (tau 1),
// "performer", "dijiang" (theta 0), "spectraformer" (upstream init) with draws from
// `seed` for `layer`. Unknown names throw oal::Error("make_method").
std::shared_ptr<attn::AttentionMethod> make_method(const std::string& name,
                                                   const MethodShape& shape, uint64_t seed,
                                                   const attn::ModelKernels* kernels);

// QuadraticAttention over one kernel per query head (fp64 L, not trainable).
std::shared_ptr<attn::AttentionMethod> make_quadratic_method(
    const std::vector<attn::QuadraticKernel>& kernels);

}  // namespace oal::calib
