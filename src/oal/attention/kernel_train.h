#pragma once
// Training forward and backward of the kernel-attention layers on the CPU (the plain OAL
// and learned-global methods, windowed OAL and windowed-only attention) as one LibTorch
// autograd function over simd/kernel_train.h: blocks of query rows whose weights the
// backward recomputes, so a layer's autograd graph holds q, k, v and the parameters
// only (O(N) memory per head, no [N, N] tensor), instead of the per-chunk HD states
// (2145 x 65 floats per KV head and chunk at d = 64) that the differentiable ATen path
// (chunked_attention.h) saves.
//
//   q [B, Hq, N, D], k [B, Hkv, N, D], v [B, Hkv, N, Dv]  ->  y [B, Hq, N, Dv]
//
// The function is windowed_pairwise (windowed/windowed_reference.h) with the layer's κ;
// S = W = 0 is the plain kernel method, hd_pairwise (oal/references.h). Differentiable
// in q, k, v, the kernels' L and log_scale (c_h); gradients in each input's dtype.
#include <ATen/ATen.h>

#include "oal/attention/oal/quadratic.h"
#include "oal/attention/windowed/window.h"

namespace oal::attn {

// Whether kernel_attention_train takes these inputs: fp32 CPU 4-D q, k, v of one length,
// kernels of at most simd::k_kernel_train_max_groups groups per head,
// and autograd recording through q, k, v, L (kernels may be nullptr) or log_scale (may be
// undefined).
bool kernel_train_ready(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const LayerKernels* kernels, const at::Tensor& log_scale);

// The layer's attention over whole sequences. kernels: nullptr for the windowed-only
// method (needs W >= 1; c_h cancels there, so log_scale is not read and gets no
// gradient); log_scale [Hq] (c_h; unused but required when S = W = 0).
// Throws oal::Error("kernel_attention_train") on inputs kernel_train_ready refuses
// (autograd aside) and on shapes that do not fit.
at::Tensor kernel_attention_train(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const LayerKernels* kernels, const at::Tensor& log_scale,
                                  const Window& window);

}  // namespace oal::attn
