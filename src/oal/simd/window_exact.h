#pragma once
// The exact part of a windowed layer on the CPU (attention/windowed/windowed_attention.h
// has the formula), for T queries at consecutive positions: each query attends its sinks
// and its band of recent keys exactly, and the result is combined with the linear
// kernel's unnormalised sums (oal_prefill_f32 / oal_decode_step_f32 with their
// denominators) under one normaliser. fp32, (batch, KV head, query block) items in
// parallel; per query O((S + W) (d + Dv)).
#include <cstdint>

namespace oal::simd {

// Key and value rows of every (batch, KV head) unit: unit u's row r is at
// k + (u·stride + r)·d (v likewise with Dv); row r holds position first_pos + r.
struct WindowRows {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t stride = 0, count = 0, first_pos = 0;
};

struct WindowExactDims {
  int64_t batch = 1, q_heads = 1, kv_heads = 1, dim = 1, value_dim = 1;
  int64_t queries = 1, first_query = 0;  // T queries at positions first_query, first_query+1, ...
  int64_t sinks = 0, recent = 0;         // the window: S and W
};

// q [B, Hq, T, d]; sinks: rows at positions 0.. (all < S); band: rows at consecutive
// positions covering [max(S, i - W + 1), i] of every query i beyond its sinks; sums
// [B, Hq, T, Dv + 1] the kernel's numerators and denominator per query (nullptr: no
// kernel part); log_scale [Hq] (c_h) -> y [B, Hq, T, Dv]:
//   s_j = q·k_j/√d over E_i, m = max s_j, a = Σ e^(s_j − m) v_j, z = Σ e^(s_j − m),
//   ρ = max(m − c + log z, log r),
//   y = (e^(m − c − ρ) a + e^(−ρ) n) / (e^(m − c − ρ) z + e^(−ρ) r).
// Throws oal::Error("window_exact_kernel") on inconsistent sizes, a band that does not
// cover a query's window, or a query with no weight at all.
void window_exact_f32(const WindowExactDims& dims, const float* q, const WindowRows& sinks,
                      const WindowRows& band, const float* sums, const float* log_scale,
                      float* y, int threads = 0);

// One decode step (dims.queries == 1 at position dims.first_query) whose exact rows are
// all inside the window: each unit's sink rows and ring rows, the ring in any order (a
// decode state's circular buffer: the exact part is a sum). Same formula and arguments
// as window_exact_f32, q [B, Hq, d], sums [B, Hq, Dv + 1] or nullptr, y [B, Hq, Dv]. The
// G query heads of a KV head run together: one pass over its keys, one over its values
// per few heads, the accumulators in registers. Throws oal::Error("window_exact_kernel")
// on inconsistent sizes or a query with no weight at all.
void window_exact_step_f32(const WindowExactDims& dims, const float* q, const WindowRows& sinks,
                           const WindowRows& ring, const float* sums, const float* log_scale,
                           float* y, int threads = 0);

}  // namespace oal::simd
