#pragma once
// How much of a head's softmax attention lies beyond its sinks and recent window
// (window.h): the weight a windowed layer leaves to its linear kernel. A head that keeps
// most of its weight on the first token and a few recent ones loses little when
// converted; a head that looks far back needs full attention most. `oal layer-scores`
// measures it per layer (analysis/layer_scores.h) and `oal convert --layers auto:K` ranks
// layers by it.
#include <ATen/ATen.h>

#include "oal/attention/windowed/window.h"

namespace oal::attn {

// Mean softmax weight on R_i = [S, i - W] per query head: q [N, Hq, T, D], k [N, Hkv, T, D]
// (post-RoPE) -> [Hq] fp64, the average over the N sequences and every query position
// (positions whose R_i is empty count as 0). O(N·Hq·T²·D), rows in blocks of 256.
at::Tensor mass_beyond_window(const at::Tensor& q, const at::Tensor& k, const Window& window);

// The weight that chosen query rows put on chosen keys beyond the window, for one
// sequence: what a retrieval head (a head that copies a far token, as in a passkey
// answer) needs the linear part to carry. q [Hq, T, D], k [Hkv, T, D] (post-RoPE),
// rows [R] int64 (query positions in [0, T)), keys [T] bool (the tokens to be retrieved)
// -> [Hq] fp64: the mean over the rows of the softmax weight on keys j in R_i.
// Throws oal::Error("mass_on_keys") on a shape mismatch, an empty or out-of-range row
// list, or non-finite scores.
at::Tensor mass_on_keys(const at::Tensor& q, const at::Tensor& k, const at::Tensor& rows,
                        const at::Tensor& keys, const Window& window);

}  // namespace oal::attn
