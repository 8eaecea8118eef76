#pragma once
// Causal "feature-map" linear attention, shared by every baseline whose kernel is an
// inner product of positive features (TaylorShift, Performer, DiJiang, SpectraFormer):
//
//   kappa(q_i, k_j) = phi_q(i) . phi_k(j)
//   y_i = sum_{j<=i} kappa(q_i, k_j) v_j / sum_{j<=i} kappa(q_i, k_j)
//
// Shapes: phi_q [B, Hq, T, F]; phi_k [B, Hf, T, F] with Hf == Hkv (key features shared
// by the query heads of a KV head, query head h reads h / (Hq / Hkv)) or Hf == Hq (key
// features of every query head); v [B, Hkv, T, Dv]  ->  y [B, Hq, T, Dv].
// Everything is computed in the dtype of phi_q (the caller picks fp32 or fp64; phi_k
// and v are cast to it); y is in that dtype too. All functions are differentiable
// through ATen (no in-place ops on inputs). A query whose denominator is not positive
// and finite raises oal::Error naming the operation (never a silent NaN).
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace oal::attn {

// Constant-size prefix state of a feature-map attention: S = sum_j phi_k(j) v_jᵀ
// [B, Hf, F, Dv] and z = sum_j phi_k(j) [B, Hf, F], both in the compute dtype.
// `log_shift` [B, Hf] records a common log-factor divided out of every absorbed key
// feature (Performer's key max-shift); 0 for methods without one.
struct FeaturePrefix {
  at::Tensor S, z, log_shift;
  bool empty() const { return !S.defined(); }
};

// Reference: materialises the [T, T] kernel matrix of every head. O(T² F).
at::Tensor feature_attention_pairwise(const at::Tensor& phi_q, const at::Tensor& phi_k,
                                      const at::Tensor& v);

// The unnormalised sums of feature_attention_chunked and the prefix state after the
// call: num [B, Hq, T, Dv] = Σ_j κ_ij v_j and den [B, Hq, T] = Σ_j κ_ij over the prefix's
// keys and this call's keys j <= i, both in the prefix's key scale (the true sums are
// exp(after.log_shift) times these). `prefix` (may be null or empty) is not changed.
// No denominator check: a windowed layer's queries may see no kernel key at all.
struct FeatureSums {
  at::Tensor num, den;
  FeaturePrefix after;
};
FeatureSums feature_sums_chunked(const at::Tensor& phi_q, const at::Tensor& phi_k,
                                 const at::Tensor& v, int64_t chunk,
                                 const FeaturePrefix* prefix);

// Chunked evaluation: per chunk of `chunk` tokens the exact intra-chunk kernel sum plus
// the carried prefix state, then the state absorbs the chunk. O(T (C + Dv) F) time,
// memory independent of T apart from inputs and output. When `prefix` is non-null its
// state is used as the tokens before this call (it may be empty) and is updated in
// place to include these T tokens. `chunk` >= 1.
at::Tensor feature_attention_chunked(const at::Tensor& phi_q, const at::Tensor& phi_k,
                                     const at::Tensor& v, int64_t chunk = 64,
                                     FeaturePrefix* prefix = nullptr);

// How feature_attention_at evaluates (both give the same numbers up to rounding).
enum class AtPath {
  automatic,  // the cheaper of the two below for the given sizes
  rows,       // kernel rows of the sampled queries against all keys: O(P T F)
  prefix,     // prefix states at the sampled positions by segment sums: O(T F Dv + P F Dv)
};

// Outputs only at sampled query positions (for fitting): phi_q_rows [B, Hq, P, F] are
// the features of the queries at `positions` (strictly increasing, each in [0, T)),
// phi_k [B, Hf, T, F], v [B, Hkv, T, Dv]  ->  [B, Hq, P, Dv]; query p sees keys j <= p.
at::Tensor feature_attention_at(const at::Tensor& phi_q_rows, const at::Tensor& phi_k,
                                const at::Tensor& v, const std::vector<int64_t>& positions,
                                AtPath path = AtPath::automatic);

// Normalised causal attention from an unnormalised log-kernel matrix:
// log_kappa [B, Hq, P, S] (row p = a query at key position positions[p], or at
// S - P + p when `positions` is empty), v [B, Hkv, S, Dv] -> [B, Hq, P, Dv]. Row-wise
// max-shifted, so any finite log-kernel works. The O(N²) reference of every method.
at::Tensor log_kernel_attention(const at::Tensor& log_kappa, const at::Tensor& v,
                                const std::vector<int64_t>& positions = {});

// Brings a prefix state and new key features to one common key log-shift (Performer's
// running key max): with c = max(prefix.log_shift, shift) per [B, Hf], rescales the
// state by exp(prefix.log_shift - c) and returns phi_k [B, Hf, T, F] times
// exp(shift - c); prefix.log_shift becomes c. An empty prefix just records `shift`.
// Normalised outputs are unchanged by a common factor, so this keeps decoding exact.
at::Tensor align_key_shift(FeaturePrefix& prefix, const at::Tensor& phi_k,
                           const at::Tensor& shift);

// Repeats KV heads for their query heads: x [B, Hkv, T, X] -> [B, Hq, T, X].
at::Tensor expand_kv_heads(const at::Tensor& x, int64_t q_heads);

}  // namespace oal::attn
