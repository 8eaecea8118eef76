#pragma once
// The plain O(T²) form of a windowed layer (window.h), for tests and for fitting:
//
//   y_i = ( sum_{j in E_i} exp(s_ij - c_h) v_j + sum_{j in R_i} kappa(q_i, k_j) v_j )
//         / ( sum_{j in E_i} exp(s_ij - c_h)     + sum_{j in R_i} kappa(q_i, k_j) )
//
// with s_ij = q_i·k_j / sqrt(D) and c_h the per-query-head log-scale that balances the
// exact part against the kernel. Written as one row-normalised log-weight matrix:
// log w_ij = s_ij - c_h on E_i, log kappa_ij on R_i, -inf elsewhere (so any magnitude of
// s is safe: the row maximum is subtracted before exp).
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "oal/attention/windowed/window.h"

namespace oal::attn {

// Log-weights of query rows at key positions `positions` (strictly increasing, each in
// [0, T)): scores [B, Hq, P, T] (s_ij), log_kappa [B, Hq, P, T] (log kappa for every pair;
// only R entries are read; undefined: no linear part, the windowed-only method),
// log_scale [Hq] -> [B, Hq, P, T], -inf outside E ∪ R. Differentiable in every input.
at::Tensor windowed_log_weights(const at::Tensor& scores, const at::Tensor& log_kappa,
                                const at::Tensor& log_scale, const Window& window,
                                const std::vector<int64_t>& positions);

// The reference, every position, fp64: q [B, Hq, T, D], k [B, Hkv, T, D],
// v [B, Hkv, T, Dv], kappa [B, Hq, T, T] (kappa for every pair, > 0 on R; undefined: no
// linear part), log_scale [Hq] -> y [B, Hq, T, Dv] fp64.
at::Tensor windowed_pairwise(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& kappa, const at::Tensor& log_scale,
                             const Window& window);

}  // namespace oal::attn
