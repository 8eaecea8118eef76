#pragma once
// One windowed decode step on the CPU, once the window is full (attention/windowed/
// windowed_attention.h has the formula): the query attends its sinks and the ring (every
// row of both is in its exact set E_i) exactly, and the result is combined with the
// kernel's unnormalised sums (from oal_decode_step_f32 with `sums`) under one
// normaliser. fp32, no allocation, (batch, KV head) units in parallel.
#include <cstdint>

namespace oal::simd {

struct WindowDecodeDims {
  int64_t batch = 1, q_heads = 1, kv_heads = 1, dim = 1, value_dim = 1;
  int64_t sinks = 0, ring = 0;  // rows of each held now (sinks + ring >= 1)
};

// q [B, Hq, d]; sink_k [B, Hkv, sinks, d], sink_v [B, Hkv, sinks, Dv], ring_k
// [B, Hkv, ring, d], ring_v [B, Hkv, ring, Dv] (contiguous); sums [B, Hq, Dv + 1] the
// kernel's numerators and denominator (nullptr: no kernel part); log_scale [Hq] (c_h) ->
// y [B, Hq, Dv]:
//   s_j = q·k_j/√d, m = max_j s_j, a = Σ e^(s_j − m) v_j, z = Σ e^(s_j − m),
//   ρ = max(m − c + log z, log r),
//   y = (e^(m − c − ρ) a + e^(−ρ) n) / (e^(m − c − ρ) z + e^(−ρ) r).
void window_decode_f32(const WindowDecodeDims& dims, const float* q, const float* sink_k,
                       const float* sink_v, const float* ring_k, const float* ring_v,
                       const float* sums, const float* log_scale, float* y, int threads = 0);

}  // namespace oal::simd
