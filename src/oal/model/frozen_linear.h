#pragma once
// Training through frozen projections: y = x Wᵀ + b with a gradient for x only, both
// directions on the CPU projection kernels (simd/linear_f32.h) instead of at::linear.
//
// Why: at::linear runs on the BLAS library's own threads while the kernels and ATen run
// on OpenMP's; with both pools on the same cores, OpenMP's waiting workers spin against
// BLAS's and a LoRA update took 3.4x as long (docs/adapt.md "Training speed"). The
// projection kernels use one pool. The backward product dx = dy W needs Wᵀ [in, out] as
// a kernel operand: it is built once per model (prepare_frozen_projections), not per call.
#include <ATen/ATen.h>

#include "oal/model/linear.h"

namespace oal::model {

class Transformer;

// Builds Wᵀ (Linear::weight_t) for every q/k/v/o and MLP projection of `model` whose
// weight is dense fp32 on the CPU and does not require grad; after this, forward() on an
// fp32 CPU input that records autograd takes frozen_linear. 4 bytes per weight more.
// Returns the number of projections prepared.
int64_t prepare_frozen_projections(Transformer& model);

// x [..., in] fp32 on the CPU -> [..., out] fp32, differentiable in x (not in W or b).
// Requires lin.weight_t (prepare_frozen_projections). The adapter (lin.delta) is not
// applied here: Linear::forward adds it.
at::Tensor frozen_linear(const at::Tensor& x, const Linear& lin);

// y [..., N] = x [..., K] wᵀ (+ bias [N]) through the projection kernels, no autograd:
// x fp32 on the CPU (any strides), w [N, K] fp32 contiguous, bias fp32 contiguous or
// undefined. The products of frozen_linear and of the chunked LM loss.
at::Tensor kernel_product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias = {});

// Whether frozen_linear can take x through lin.
bool frozen_linear_ready(const Linear& lin, const at::Tensor& x);

}  // namespace oal::model
