#pragma once
// The exact part of the windowed evaluation in ATen (windowed_attention.h: the path for
// fp64, for autograd and wherever the CPU kernel of simd/window_exact.h does not run):
// T queries at positions p0 .. p0 + T - 1 against their exact keys (window.h: the sinks
// and the recent W positions), by blocks of k_exact_chunk query rows.
//
//   q [B, Hq, T, D]; all_k [B, Hkv, Nk, D], all_v [B, Hkv, Nk, Dv]: the first sinks_held
//   rows are positions 0 .. sinks_held - 1, the rest consecutive positions ending at
//   p0 + T - 1. Compute dtype (fp32 or fp64).
//   -> m [B, Hq, T] (each row's largest exact score; -inf without exact keys),
//      a [B, Hq, T, Dv] = Σ exp(s - m) v and z [B, Hq, T] = Σ exp(s - m) over the row's
//      exact keys (s = q·k / √D).
//
// Differentiable in q, all_k and all_v through a and z; m carries no gradient (it only
// shifts a and z, whose scale cancels in the combination). Under autograd it is one
// autograd function that keeps its inputs only and recomputes each block's scores in the
// backward, so memory stays that of q, k, v at any length (autograd of the block loop
// would keep every block's [n, S + W + n] scores and weights: ~0.5 GiB per layer at
// 8K tokens for SmolLM2 at W = 256).
#include <ATen/ATen.h>

#include <cstdint>

#include "oal/attention/windowed/window.h"

namespace oal::attn {

// Query rows per block of the exact part's ATen code (and of its training form).
inline constexpr int64_t k_exact_chunk = 64;

struct ExactSums {
  at::Tensor m, a, z;
};

ExactSums exact_sums(const at::Tensor& q, const at::Tensor& all_k, const at::Tensor& all_v,
                     int64_t p0, int64_t sinks_held, const Window& window);

}  // namespace oal::attn
