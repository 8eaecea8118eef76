#pragma once
// Exact causal softmax attention with grouped-query attention (GQA).
//
//   q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv]  ->  y [B, Hq, T, Dv]
//
// Hq a multiple of Hkv (query head h reads KV head h / (Hq / Hkv)); S >= T, the queries
// being the last T positions (query i sees keys j <= i + S - T; S == T for a whole
// sequence, S > T for a decode step after a KV cache). `scale` defaults to 1/sqrt(D).
// Input dtype fp64, fp32, bf16 or fp16; computed in fp64 for fp64 input and fp32
// otherwise; output in the input dtype. Both are differentiable through ATen.
// Errors (oal::Error) name the operation: "softmax_attention_naive" / "..._tiled".
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

#include "oal/simd/flash_softmax.h"

namespace oal::attn {

// Reference: materialises the [T, S] score matrix of every head.
at::Tensor softmax_attention_naive(const at::Tensor& q, const at::Tensor& k,
                                   const at::Tensor& v,
                                   std::optional<double> scale = std::nullopt);

// Online softmax over key blocks (flash-attention style) for query blocks of the same
// size: never allocates more than [B, Hq, block, block] scores at once, and skips key
// blocks entirely above the causal diagonal. `block` >= 1.
at::Tensor softmax_attention_tiled(const at::Tensor& q, const at::Tensor& k,
                                   const at::Tensor& v, int64_t block = 128,
                                   std::optional<double> scale = std::nullopt);

// The flash-style CPU kernel (simd/flash_softmax.h) on fp32 copies of the inputs:
// same shapes and S >= T rule as above, fp32 or bf16 CPU tensors without autograd (the
// SoftmaxAttention entry point checks simd_blocker() first; here a blocked input
// throws oal::Error("softmax_attention_flash") with the reason). Output in q's dtype.
at::Tensor softmax_attention_flash(const at::Tensor& q, const at::Tensor& k,
                                   const at::Tensor& v,
                                   std::optional<double> scale = std::nullopt,
                                   const simd::FlashOptions& options = {});

}  // namespace oal::attn
