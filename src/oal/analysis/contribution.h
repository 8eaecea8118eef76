#pragma once
// Dimension-wise query–key contribution scores (paper Eq. 2).
//
// For one prompt of N tokens, causal pairs Ω = {(i, j): j <= i}, |Ω| = N (N + 1) / 2:
//   χ_r = (1 / |Ω|) Σ_{(i,j) ∈ Ω} q_{i,r} k_{j,r} / sqrt(d)
// where q are post-RoPE queries of a query head and k post-RoPE keys of the KV head it
// reads under GQA (query head h reads KV head h / (Hq / Hkv), as in HF's repeat_kv).
// Because Σ_{j<=i} k_{j,r} is a prefix sum, χ costs O(N d) per head, not O(N² d).
//
// The magnitude counterpart A_r uses |q_{i,r} k_{j,r}| = |q_{i,r}| |k_{j,r}| and the
// same prefix-sum trick; it is what the top-k contribution share (Fig. 5) is taken of
// (see heterogeneity.h for why).
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace oal::analysis {

// χ for a batch of equally long prompts, O(N d) via prefix sums of k.
// q [B, Hq, T, D], k [B, Hkv, T, D], any floating dtype, Hq % Hkv == 0, T >= 1.
// Returns [B, Hq, D] fp64: one χ row per prompt and query head.
at::Tensor contribution_scores(const at::Tensor& q, const at::Tensor& k);

// Same shapes; the mean absolute contribution A_r = (1/|Ω|) Σ |q_{i,r}| |k_{j,r}| / sqrt(d).
// Returns [B, Hq, D] fp64.
at::Tensor contribution_magnitudes(const at::Tensor& q, const at::Tensor& k);

// χ of every prefix length n = 1..T at once (q/k of a causal model at positions < n do
// not depend on later tokens, so a prefix's χ is χ of the first n rows).
// q [B, Hq, T, D], k [B, Hkv, T, D]. Returns [B, Hq, T, D] fp64; row n - 1 is χ of the
// length-n prefix.
at::Tensor contribution_scores_by_prefix(const at::Tensor& q, const at::Tensor& k);

// Magnitude counterpart of contribution_scores_by_prefix: A of every prefix length.
// Same shapes; returns [B, Hq, T, D] fp64.
at::Tensor contribution_magnitudes_by_prefix(const at::Tensor& q, const at::Tensor& k);

// Plain O(N² d) definition, one explicit loop per causal pair, fp64 accumulation.
// Reference for tests only. Same shapes and result as contribution_scores.
at::Tensor contribution_scores_reference(const at::Tensor& q, const at::Tensor& k);

// Equal-weight average over prompts: per_prompt [P, ...] → [...] (fp64). P >= 1.
at::Tensor average_over_prompts(const at::Tensor& per_prompt);

}  // namespace oal::analysis
