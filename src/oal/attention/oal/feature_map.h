#pragma once
// Internal to src/oal/attention/oal/{chunked_attention,references,feature_map}.cpp: the ATen
// building blocks the HD references and the chunked evaluation share (feature maps, prepared
// coefficients, checks, readout). Shapes as in chunked_attention.h; "compute dtype" = fp64 for fp64
// inputs, fp32 otherwise.
#include <ATen/ATen.h>

#include <string_view>

#include "oal/attention/oal/quadratic.h"
#include "oal/attention/qkv_shape.h"

namespace oal::attn::hd_detail {

// Kernel quantities one evaluation needs, in the compute dtype (differentiable in L).
struct Prepared {
  at::Tensor z_weight;  // [Hq, n, d]: L[h, g(r)+1, c] at [h, c, r] (factored form)
  at::Tensor z_const;   // [Hq, n]: L[h, 0, c]
  at::Tensor phi_a;     // [Hq]: a
  at::Tensor phi_b;     // [Hq, d]: b_r / sqrt(d)
  at::Tensor phi_c;     // [Hq, P]: m_rt C_rt / d at the packed pairs
};
Prepared prepare(const LayerKernels& lk, at::ScalarType ct, const at::Device& dev);

// Flat index r * d + t of the pairs r <= t in the packed H2 order (triu_indices order).
at::Tensor packed_pair_index(int64_t d, const at::Device& dev);
// phiK(k): [B, H, T, d] -> [B, H, T, Df] = [1, k_r, k_r k_t (r <= t)].
at::Tensor phi_k(const at::Tensor& k);
// phiQ(q) per query head: [B, Hq, T, d] -> [B, Hq, T, Df].
at::Tensor phi_q(const at::Tensor& q, const Prepared& p);
// One chunk's causal sums among its own tokens, in the factored form (weights >= eps):
// ũ_i = sum_{j <= i in the chunk} kappa(q_i, k_j) u_j.  qb [B, Hq, tc, d], kb [B, Hkv, tc, d],
// ub [B, Hkv, tc, Dv+1] -> [B, Hkv, G, tc, Dv+1].
at::Tensor intra_chunk_sums(const at::Tensor& qb, const at::Tensor& kb, const at::Tensor& ub,
                            const Prepared& p, double eps);
// A chunk's reads of the state of everything before it: phiQ(q) · S.  qb [B, Hq, tc, d],
// S [B, Hkv, Df, Dv+1] -> [B, Hkv, G, tc, Dv+1].
at::Tensor state_reads(const at::Tensor& qb, const Prepared& p, const at::Tensor& S);
// What a chunk adds to the state: phiK(k)ᵀ u.  kb [B, Hkv, tc, d], ub [B, Hkv, tc, Dv+1]
// -> [B, Hkv, Df, Dv+1].
at::Tensor state_update(const at::Tensor& kb, const at::Tensor& ub);
// The chunked evaluation: ũ [B, Hkv, G, T, Dv+1] of qc [B, Hq, T, d], kc [B, Hkv, T, d],
// uc [B, Hkv, T, Dv+1] (compute dtype) after the state S [B, Hkv, Df, Dv+1], which is
// updated in place, or replaced by a new tensor when autograd records through the
// inputs (then the loop is differentiable: what the linear-time training form,
// chunked_train.h, replaces on the CPU); `state_empty` (S == 0) skips the first chunk's
// reads.
at::Tensor chunked_sums(const at::Tensor& qc, const at::Tensor& kc, const at::Tensor& uc,
                        const Prepared& p, double eps, at::Tensor& S, bool state_empty,
                        int64_t chunk);
// Common checks of an HD evaluation call (inputs + kernels); returns the shape.
// `kernels_validated` (HdOptions): check only that the kernels fit the inputs.
AttentionDims check_hd_inputs(std::string_view op, const at::Tensor& q, const at::Tensor& k,
                              const at::Tensor& v, const LayerKernels& lk, bool longer_keys,
                              bool kernels_validated = false);
// u = [v ; 1]: [B, Hkv, T, Dv] -> [B, Hkv, T, Dv + 1].
at::Tensor with_ones(const at::Tensor& v);
// ũ [B, Hkv, G, T, Dv+1] -> y [B, Hq, T, Dv] after checking every denominator is finite
// and > 0 (throws oal::Error naming `op` otherwise).
at::Tensor readout(std::string_view op, const at::Tensor& ut, const AttentionDims& s,
                   at::ScalarType out);

}  // namespace oal::attn::hd_detail
