#pragma once
// Chunked OAL prefill on the CPU (paper Sec. 4.1/4.4, DESIGN.md §1 "Chunked prefill").
// For each chunk of C positions and each query head h of KV head u:
//   y_i = [ phiQ_h(q_i) · S_u  +  sum_{j in chunk, j <= i} kappa_h(q_i, k_j) [v_j; 1] ]
//         normalised by its last channel,
// where S_u [Df, Dv+1] holds the chunks before (the HD state, attention/oal/recurrent_state.h
// layout) and the intra-chunk weights use the factored form eps + ||Lᵀ s̄||² (exactly >= eps); then
// S_u += phiK(K_c)ᵀ [V_c, 1]. Both big contractions are GEMMs: the readout stacks the
// query heads of a KV head ([group·C, Df] x [Df, Dv]), the update is [Df, C] x [C, Dv].
#include <cstdint>

#include "oal/simd/attention_dims.h"
#include "oal/simd/oal_plan.h"

namespace oal::simd {

struct OalPrefillOptions {
  int64_t chunk = 64;    // C >= 1; need not divide T
  int threads = 0;       // 0 = ATen's thread count
  // Sequence segments per KV head scanned in parallel (0 = automatic: enough to give
  // every thread work when B·Hkv < threads). Segment s first sums its own state
  // contribution, the contributions are prefix-summed, then every segment runs its
  // chunks from its prefix state: the state update is done twice (≈ 2/(group+2) more
  // FLOPs) in exchange for parallelism across the sequence.
  int64_t segments = 0;
  // Non-null: y receives the unnormalised numerators sum kappa·v (not divided) and this
  // array [B, Hq, T] their denominators sum kappa (still checked > 0 and finite). The
  // windowed evaluation (attention/windowed/) adds an exact part before normalising.
  float* denominators = nullptr;
};

// q [B, Hq, T, d], k [B, Hkv, T, d], v [B, Hkv, T, Dv] -> y [B, Hq, T, Dv]; fp32,
// contiguous, S == T (a cached prefix is passed as `state`, not as keys).
// state: nullptr, or [B, Hkv, Df, Dv+1] fp32 (attention/oal/recurrent_state.h layout) holding the
// state before the first token on entry and after the last one on return. y may be nullptr (with a
// state): the tokens are only absorbed (no readout), e.g. to prime a decoder.
// Throws oal::Error("oal_prefill_kernel") when dims disagree with the plan or a readout
// denominator is not positive and finite (the expanded readout can cancel; never NaN).
void oal_prefill_f32(const AttentionDims& dims, const OalPlan& plan, const float* q,
                     const float* k, const float* v, float* y, float* state,
                     const OalPrefillOptions& opt = {});

// FLOPs of one prefill (multiply-add = 2), the model `oal bench` reports:
//   readout  2 · B · Hq · T · Df · (Dv + 1)
//   update   2 · B · Hkv · T · Df · (Dv + 1)
//   intra    B · Hq · sum over chunks of n_c² · (2d + 2(Dv + 1))   (full C x C blocks)
// (feature construction and the (G+1)² weight formula are not counted).
double oal_prefill_flops(const AttentionDims& dims, int64_t chunk);

}  // namespace oal::simd
