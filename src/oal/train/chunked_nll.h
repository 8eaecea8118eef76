#pragma once
// The language-model loss of a frozen LM head, computed a few positions at a time.
//
// The plain loss (log_softmax over logits = h W_lmᵀ, then NLL) holds the [M, V] logits,
// their log-softmax and, in backward, their gradient at once: for SmolLM2 (V = 49152)
// three 200 MB tensors per 1024 positions, written and read several times. Here each
// chunk of positions computes its logits, their log-sum-exp, its share of the loss and,
// when a gradient is wanted, d loss / d h = (softmax − onehot) W_lm, then drops the
// logits. Peak extra memory is one [chunk, V] block; the LM head gets no gradient (it is
// frozen: tied to the embedding in the models this project adapts).
#include <ATen/ATen.h>

#include <cstdint>

namespace oal::train {

// Positions per chunk of the loss (a [256, 49152] fp32 block is 48 MiB).
inline constexpr int64_t k_nll_chunk = 256;

// Σ_i −log softmax(h_i W_lmᵀ)[target_i]  (a 0-dim fp32 tensor), differentiable in
// `hidden` only.
//   hidden  [M, H] fp32 (any strides; may require grad)
//   head    [V, H] fp32, frozen (must not require grad)
//   targets [M] int64 in [0, V)
//   head_t  [H, V] fp32 contiguous (= headᵀ), or undefined.
// On the CPU the logits run on the projection kernels, and so does the gradient when
// head_t is given (model/frozen_linear.h says why); elsewhere at::mm.
// The gradient is computed with the loss (it costs one more GEMM per chunk, no second
// pass over the logits) when `hidden` requires grad and grad mode is on, and scaled by
// the incoming gradient in backward. Errors ("[chunked_nll] ...") for wrong shapes,
// dtypes, a head that requires grad, targets outside [0, V), chunk < 1.
at::Tensor chunked_nll_sum(const at::Tensor& hidden, const at::Tensor& head,
                           const at::Tensor& targets, int64_t chunk = k_nll_chunk,
                           const at::Tensor& head_t = {});

}  // namespace oal::train
