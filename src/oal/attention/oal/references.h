#pragma once
// References of the HD evaluation (chunked_attention.h): the same function as hd_chunked /
// hd_extend, computed the plain way, for tests and diagnostics. Shapes and dtypes as in
// chunked_attention.h.
#include <ATen/ATen.h>

#include "oal/attention/oal/quadratic.h"

namespace oal::attn {

// kappa(q_i, k_j) for every pair, factored form eps + ||Lᵀ s̄||², no causal mask:
// q [B, Hq, T, D], k [B, Hkv, S, D] -> [B, Hq, T, S] in the compute dtype.
at::Tensor hd_pair_weights(const at::Tensor& q, const at::Tensor& k, const LayerKernels& kernels);
// The same weights from the expanded coefficients a + b·x + xᵀ C x (can cancel below eps
// or even below 0 in floating point when coordinates are large; for tests/diagnostics).
at::Tensor hd_pair_weights_expanded(const at::Tensor& q, const at::Tensor& k,
                                    const LayerKernels& kernels);
// O(T²) causal reference with factored weights. Shapes as in the header comment.
at::Tensor hd_pairwise(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const LayerKernels& kernels);
// Token-by-token reference of Eq. 5-6 (H0, H1, packed symmetric H2; coefficients from
// QuadraticKernel::coefficients()). Slow; for tests.
at::Tensor hd_recurrent(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const LayerKernels& kernels);

}  // namespace oal::attn
