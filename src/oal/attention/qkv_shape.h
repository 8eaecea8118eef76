#pragma once
// Validation of the (q, k, v) triple every attention evaluation takes, of the readout
// denominator every normalised attention divides by, and the dtype the evaluation
// computes in. Shared by softmax, HD and the baselines.
#include <ATen/ATen.h>

#include <cstdint>
#include <string_view>

#include "oal/simd/attention_dims.h"

namespace oal::attn {

// Sizes of a validated attention call are the kernels' own AttentionDims (one type from
// the tensor entry points down to the raw kernels):
//   q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv], Hq % Hkv == 0, S >= T.
// With S > T the queries are the last T positions of the key sequence (a decode step
// after a cache of S - T tokens): query i sees keys j <= i + (S - T).
using simd::AttentionDims;

// Whether check_qkv scans q, k, v for NaN / Inf. `skip` only where the same call checks
// them again with a scan before use (hd_chunked hands them to hd_extend), so that no
// input is scanned twice.
enum class FiniteScan { scan, skip };

// Checks shapes, dtypes (floating, all three the same), device agreement and finiteness;
// throws oal::Error naming `op`. `allow_longer_keys`: accept S > T (cached prefix).
AttentionDims check_qkv(std::string_view op, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, bool allow_longer_keys,
                        FiniteScan finite = FiniteScan::scan);

// Throws oal::Error naming `op` unless every element of `den` (any shape: one
// normalisation sum per output row) is finite and > 0; `what` says how the caller's
// denominators can go wrong (cancellation, underflow), for the message. One device sync.
void check_denominator(std::string_view op, const at::Tensor& den, std::string_view what);

// The dtype an evaluation computes and accumulates in: fp64 for fp64 input, fp32 for
// everything else (fp32, bf16, fp16).
at::ScalarType compute_dtype(at::ScalarType input);

}  // namespace oal::attn
