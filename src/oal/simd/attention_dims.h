#pragma once
// Sizes of one causal attention call (plain numbers, no ATen): what the CPU kernels take
// and what the attention entry points' check_qkv (attention/qkv_shape.h) returns.
#include <cstdint>

namespace oal::simd {

// q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv], y [B, Hq, T, Dv], all contiguous.
// Hq % Hkv == 0 (query head h reads KV head h / (Hq / Hkv)); S >= T, query i sees keys
// j <= i + (S - T) (S > T: the queries follow a cached prefix).
struct AttentionDims {
  int64_t batch = 1, q_heads = 1, kv_heads = 1, q_len = 0, k_len = 0, dim = 0, value_dim = 0;
  int64_t group_size() const { return q_heads / kv_heads; }
  int64_t offset() const { return k_len - q_len; }
};

}  // namespace oal::simd
