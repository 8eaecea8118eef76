#pragma once
// HD (Hadamard-diagonal) evaluation of the OAL kernel (paper Sec. 4.1, Eq. 5-6, App. D):
// causal attention with weights kappa(q_i, k_j) = eps + ||Lᵀ s̄_ij||² (quadratic.h),
//
//   y_i = sum_{j<=i} kappa(q_i, k_j) v_j / sum_{j<=i} kappa(q_i, k_j),
//
// on  q [B, Hq, T, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv] -> y [B, Hq, T, Dv], with one
// kernel per query head (LayerKernels, d == D) and grouped-query attention (query head h
// reads KV head h / (Hq / Hkv)). Inputs fp64, fp32, bf16 or fp16; computed in fp64 for
// fp64 input and fp32 otherwise; output in the input dtype.
//
// Four evaluations of the same function:
//   hd_pairwise   O(T²) reference, weights in the factored form (exactly >= eps)
//   hd_recurrent  token-by-token reference of Eq. 5-6 with separate H0, H1, packed H2
//                 (both in references.h)
//   hd_chunked    chunked prefill (linear in T), differentiable w.r.t. q, k, v and L
//   hd_extend / HdDecodeState   the same chunked code continuing a state (decode)
// The state they carry and its layout: recurrent_state.h.
//
// Numerics: the intra-chunk weights use the factored form eps + ||Lᵀ s̄||² (>= eps, no
// cancellation); the state readout is the expanded form and can cancel when coordinates
// are large. Every readout denominator is checked: a non-positive or non-finite one
// throws oal::Error instead of returning NaN.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "oal/attention/method.h"
#include "oal/attention/oal/recurrent_state.h"
#include "oal/attention/oal/quadratic.h"
#include "oal/attention/qkv_shape.h"
#include "oal/simd/oal_decode.h"
#include "oal/simd/oal_plan.h"

namespace oal::attn {

// Which implementation hd_chunked / hd_extend use. `automatic` runs the CPU kernels
// (src/oal/simd: chunked prefill; a fused step for HdDecodeState's single tokens)
// whenever hd_simd_blocker() allows, else the ATen code of this module (under autograd
// on the CPU: the linear-time training form, chunked_train.h); `aten` forces the ATen
// chunk loop, differentiable by plain autograd (every chunk's features kept).
enum class HdBackend { automatic, aten };

// Where the chunked training form overtakes the pairwise kernel (measured: docs/adapt.md).
inline constexpr int64_t k_default_chunked_train_from = 8192;

struct HdOptions {
  int64_t chunk = 64;  // tokens per chunk, >= 1; need not divide T
  HdBackend backend = HdBackend::automatic;
  // Where the kernel plan of these kernels is kept between calls (QuadraticAttention
  // and its decoders share one per layer); nullptr builds it per kernel call.
  std::shared_ptr<OalPlanCache> plan_cache = nullptr;
  // Set by an owner that validated the kernels when it was built (QuadraticAttention):
  // each call then checks only that they fit the inputs (query heads, d), not their
  // structure again. Their L may still change (training updates it in place); a NaN or
  // Inf there reaches every κ and fails the readout's denominator check.
  bool kernels_validated = false;
  // Under autograd on the CPU (QuadraticAttention and WindowedAttention over it),
  // sequences of at least this many tokens train through the linear-time chunked form
  // (chunked_train.h), shorter ones through the pairwise training kernel
  // (kernel_train.h, O(T²) time, faster below a few thousand tokens at d = 64:
  // docs/adapt.md "Training speed").
  int64_t chunked_train_from = k_default_chunked_train_from;
};

struct HdPrefill {
  at::Tensor y;    // [B, Hq, T, Dv], input dtype
  HdState state;   // state after all T tokens (continues `initial` when given)
};

// ---- Linear-time evaluation ---------------------------------------------------------
// The part of hd_simd_blocker that the method holds, the same for every call:
// options.backend is aten, or autograd is recording through kernels.L ("" when neither).
std::string hd_method_blocker(const LayerKernels& lk, const HdOptions& options);
// Why hd_extend will not hand these inputs to the CPU kernel ("" when it will):
// options.backend is aten, a tensor is not on the CPU, the dtype is not fp32 or bf16, the
// state is not fp32, or autograd is recording through q, k, v, kernels.L or the state.
// The kernel computes the same function in fp32 (its intra-chunk weights are the same
// factored form; tests/attention/test_op_consistency.cpp holds the tolerances).
std::string hd_simd_blocker(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const LayerKernels& kernels, const HdState& state,
                              const HdOptions& options);

// Chunked prefill; continues `initial` when given (not modified). Differentiable w.r.t.
// q, k, v, kernels.L and initial->S, in time linear in T and memory of q, k, v and one
// state (chunked_train.h). This is the dispatch point for the fast kernels.
HdPrefill hd_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const LayerKernels& kernels, const HdOptions& options = {},
                     const HdState* initial = nullptr);
// Attends T new tokens after everything in `state` and absorbs them into `state` (in
// place when no gradient is being recorded). Returns y [B, Hq, T, Dv].
at::Tensor hd_extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const LayerKernels& kernels, HdState& state,
                     const HdOptions& options = {});
// Unnormalised sums of hd_extend: num = sum_j kappa(q_i, k_j) v_j [B, Hq, T, Dv] and
// den = sum_j kappa(q_i, k_j) [B, Hq, T], in the compute dtype (den checked > 0 and
// finite); y = num / den. Same dispatch, state update and differentiability as
// hd_extend. The windowed evaluation (attention/windowed/) adds its exact part to both.
struct HdParts {
  at::Tensor num, den;
};
HdParts hd_extend_parts(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const LayerKernels& kernels, HdState& state,
                        const HdOptions& options = {});
// One token: q [B, Hq, D], k [B, Hkv, D], v [B, Hkv, Dv] -> y [B, Hq, Dv].
at::Tensor hd_step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const LayerKernels& kernels, HdState& state, const HdOptions& options = {});

// DecodeState over hd_extend: constant size (state_bytes() = bytes of S once the first
// tokens fixed Hkv, D, Dv; 0 before). Created empty or from a prefill's state (copied,
// so the prefill's HdState is not modified by later extends). Inputs the CPU kernels can
// take run the fused decode step (one token) or the chunked prefill kernel (several),
// with the plan from options.plan_cache (one is made when none is given) and a workspace
// sized at the first step; the kernels are validated once, at construction, so a step's
// own checks are O(new tokens). absorb() skips the readout (prefill kernel without y).
class HdDecodeState : public DecodeState {
 public:
  HdDecodeState(LayerKernels kernels, int64_t batch, HdOptions options = {});
  HdDecodeState(LayerKernels kernels, HdState state, HdOptions options = {});
  at::Tensor extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override;
  void absorb(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override;
  int64_t tokens() const override { return state_ ? state_->tokens : 0; }
  int64_t state_bytes() const override { return state_ ? state_->bytes() : 0; }
  // "S" [B, Hkv, Df, Dv + 1] (none before the first tokens).
  StateSnapshot snapshot() const override;
  void restore(const StateSnapshot& snapshot) override;
  // The state (empty optional before the first extend of an empty-created decoder).
  const std::optional<HdState>& state() const { return state_; }

 private:
  // Checks new tokens against the kernels and the state (created at the first tokens);
  // O(new tokens).
  AttentionDims check_tokens(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);
  // The kernel path for checked tokens (y = nullptr: absorb only).
  at::Tensor run_simd(const AttentionDims& s, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, bool readout);
  LayerKernels kernels_;
  int64_t batch_;
  HdOptions options_;
  std::optional<HdState> state_;
  std::unique_ptr<simd::OalDecodeWorkspace> ws_;  // sized for state_
};

}  // namespace oal::attn
