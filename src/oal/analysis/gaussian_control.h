#pragma once
// Isotropic Gaussian control (paper App. A.1): the pretrained post-RoPE queries and
// keys replaced by i.i.d. N(0, 1) samples of the same shape, everything else unchanged.
// Samples come from SplitMix64 + Box–Muller, so a seed gives the same values on every
// platform and LibTorch version.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace oal::analysis {

// i.i.d. standard normal fp64 tensor of `shape`, deterministic for `seed`.
at::Tensor standard_normal(const std::vector<int64_t>& shape, uint64_t seed);

// Mean contribution magnitudes of the control for prompts of the given lengths:
// per prompt p, q ~ N(0,1) [1, Hq, T_p, D], k ~ N(0,1) [1, Hkv, T_p, D] (seed mixed with p),
// A_p = contribution_magnitudes(q, k); returns the equal-weight mean over prompts
// [Hq, D] fp64. Also returns the signed χ the same way in *chi when non-null.
at::Tensor gaussian_control_magnitudes(const std::vector<int64_t>& prompt_lengths, int64_t q_heads,
                                       int64_t kv_heads, int64_t head_dim, uint64_t seed,
                                       at::Tensor* chi = nullptr);

// A well-mixed 64-bit seed from a base seed and a stream index (e.g. layer, prompt).
uint64_t mix_seed(uint64_t seed, uint64_t stream);

}  // namespace oal::analysis
