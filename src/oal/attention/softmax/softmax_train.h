#pragma once
// Causal softmax attention for training on the CPU: flash attention's algorithm
// (Dao et al., 2022) — the forward keeps only the output and each row's log-sum-exp,
// the backward recomputes each query block's probabilities from them — so memory is
// O(N) per head at any length, never the [N, N] scores the differentiable tiled
// reference saves for autograd (softmax.h; 3.9 GB for SmolLM2 at N = 1024).
//
//   q [B, Hq, N, D], k [B, Hkv, N, D], v [B, Hkv, N, Dv]  ->  y [B, Hq, N, Dv]
//
// fp32 CPU tensors, queries and keys of the same length (a whole sequence), GQA as in
// softmax.h; differentiable in q, k and v. Work is spread over ATen's threads (forward:
// query blocks of every head; backward: one item per query head, whose key/value
// gradients are summed over its group afterwards); the products run on gemm_f32 with
// BLAS held to one thread, so one thread pool does all the work.
#include <ATen/ATen.h>

#include <cstdint>

namespace oal::attn {

// Query rows per block of the training kernel.
inline constexpr int64_t k_train_block = 64;

// Whether softmax_attention_train takes these inputs: CPU fp32, N_q == N_k, and autograd
// recording through at least one of them.
bool softmax_train_ready(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// The attention above; scale as softmax.h (1/sqrt(D) by the caller's default). Throws
// oal::Error("[softmax_attention_train] ...") for inputs softmax_train_ready refuses
// (autograd aside) or bad shapes.
at::Tensor softmax_attention_train(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   double scale, int64_t block = k_train_block);

}  // namespace oal::attn
