#pragma once
// Internal to src/oal/attention/oal: the linear-time training form of the chunked HD
// evaluation (chunked_attention.h), which hd_extend / hd_extend_parts use on the CPU
// whenever autograd records through q, k, v, L or the state.
//
// One autograd function: its graph keeps q, k, v, L and the initial state only, not the
// per-chunk features and states that autograd of the chunk loop would save (2145 x 65
// values per KV head and chunk at d = 64, ~8 MiB per token for SmolLM2). The backward
// recomputes each chunk in two sweeps, so time stays linear in T and memory is one
// state and one chunk at a time:
//   forward order  the queries' reads of the state before their chunk (dq, dL), the
//                  state rebuilt as it goes;
//   reverse order  each chunk's own sums and its writes into the state (dq, dk, dv, dL),
//                  with R = d loss / d (state after the chunk) accumulated backwards:
//                  R = dS_final + sum over later chunks of phiQ(q)ᵀ dũ.
// The initial state's gradient is R after the first chunk has been passed. The reads and
// writes (the big products, Df x (Dv+1) per row) have their gradients written out as
// matrix products; a chunk's own sums (tc x tc) go through autograd of the factored form;
// L's gradient is taken once, through prepare(), from the summed gradients of phiQ's
// coefficients and the factored weights. The forward runs the inference prefill kernel
// for fp32 CPU inputs.
#include <ATen/ATen.h>

#include <cstdint>

#include "oal/attention/oal/quadratic.h"
#include "oal/simd/oal_plan.h"

namespace oal::attn::hd_detail {

struct TrainSums {
  at::Tensor ut;  // [B, Hkv, G, T, Dv+1]: numerators, then the denominator
  at::Tensor S;   // [B, Hkv, Df, Dv+1]: S0 plus every token's features
};

// qc [B, Hq, T, d], kc [B, Hkv, T, d], vc [B, Hkv, T, Dv] and S0 [B, Hkv, Df, Dv+1] in
// the compute dtype; lk.L in its own dtype (its gradient comes back in it). state_empty:
// S0 == 0 (the first chunk's reads are skipped, and S0 gets the gradient of the later
// reads and of the final state only). Differentiable in qc, kc, vc, lk.L and S0. The
// caller has checked the shapes (check_hd_inputs). plan: the forward runs the fp32 CPU
// prefill kernel with it (fp32 CPU inputs, the plan of lk), else ATen (nullptr).
TrainSums chunked_sums_train(const at::Tensor& qc, const at::Tensor& kc, const at::Tensor& vc,
                             const LayerKernels& lk, const at::Tensor& S0, bool state_empty,
                             int64_t chunk, const simd::OalPlan* plan);

}  // namespace oal::attn::hd_detail
