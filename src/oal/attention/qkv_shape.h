#pragma once
// Validation of the (q, k, v) triple every attention evaluation takes, of the readout
// denominator every normalised attention divides by, and the dtype the evaluation
// computes in. Shared by softmax, HD and the baselines.
#include <ATen/ATen.h>

#include <cstdint>
#include <string_view>

#include "oal/kernels/cpu/attention_dims.h"

namespace oal::attn {

// Sizes of a validated attention call:
//   q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv], Hq % Hkv == 0, S >= T.
// With S > T the queries are the last T positions of the key sequence (a decode step
// after a cache of S - T tokens): query i sees keys j <= i + (S - T).
struct QkvShape {
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, k_len = 0, dim = 0, value_dim = 0;
  // Query heads per KV head (query head h reads KV head h / group_size()).
  int64_t group_size() const { return q_heads / kv_heads; }
  // S - T: how many cached keys precede the first query.
  int64_t offset() const { return k_len - q_len; }
};

// The same sizes as the CPU kernels take them.
kernels::cpu::AttentionDims kernel_dims(const QkvShape& s);

// Checks shapes, dtypes (floating, all three the same), device agreement and finiteness;
// throws oal::Error naming `op`. `allow_longer_keys`: accept S > T (cached prefix).
QkvShape check_qkv(std::string_view op, const at::Tensor& q, const at::Tensor& k,
                   const at::Tensor& v, bool allow_longer_keys);

// Throws oal::Error naming `op` unless every element of `den` (any shape: one
// normalisation sum per output row) is finite and > 0; `what` says how the caller's
// denominators can go wrong (cancellation, underflow), for the message. One device sync.
void check_denominator(std::string_view op, const at::Tensor& den, std::string_view what);

// The dtype an evaluation computes and accumulates in: fp64 for fp64 input, fp32 for
// everything else (fp32, bf16, fp16).
at::ScalarType compute_dtype(at::ScalarType input);

}  // namespace oal::attn
