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
//   hd_chunked    chunked prefill (linear in T), differentiable w.r.t. q, k, v and L
//   hd_extend / HdDecodeState   the same chunked code continuing a state (decode)
//
// ---- HD state layout (the fast kernels implement exactly this) ------------------------
// One state per KV head (it depends on keys and values only; the query heads of a KV
// head share it and each applies its own coefficients). Feature form:
//
//   S [B, Hkv, Df, Dv + 1],  Df = 1 + D + D(D+1)/2,  contiguous row-major,
//   S[b, h, f, :] = sum_{j absorbed} phiK(k_j)[f] * u_j,   u_j = [v_j ; 1]
//
// Feature rows f:  0               -> H0          (phiK = 1)
//                  1 + r           -> H1[r]       (phiK = k_r),            r = 0..D-1
//                  1 + D + p(r, t) -> H2[r, t]    (phiK = k_r k_t),        r <= t
// with p(r, t) enumerating pairs r <= t row-major: (0,0), (0,1), ..., (0,D-1), (1,1), ...,
// i.e. p(r, t) = r D - r (r - 1) / 2 + (t - r) (the order of at::triu_indices(D, D)).
// Column Dv is the denominator channel (the 1 appended to v).
// Readout (Eq. 6) for query head h: ũ = phiQ_h(q) · S, y = ũ[:Dv] / ũ[Dv], with
//   phiQ_h(q) = [a, b_r q_r / sqrt(D), m_rt C_rt q_r q_t / D (r <= t)],
//   m_rt = 1 if r == t else 2, and a, b, C the expanded coefficients of head h.
// dtype: fp32 for fp32/bf16/fp16 inputs, fp64 for fp64 inputs.
//
// Numerics: the intra-chunk weights use the factored form eps + ||Lᵀ s̄||² (>= eps, no
// cancellation); the state readout is the expanded form and can cancel when coordinates
// are large. Every readout denominator is checked: a non-positive or non-finite one
// throws oal::Error instead of returning NaN.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "oal/attention/method.h"
#include "oal/attention/qkv_shape.h"
#include "oal/attention/quadratic.h"
#include "oal/kernels/cpu/oal_decode.h"
#include "oal/kernels/cpu/oal_plan.h"

namespace oal::attn {

// Df = kernels::cpu::oal_feature_dim(d) = 1 + d + d(d+1)/2 (2145 for d = 64).

// The recurrent state of one layer for a batch (layout above).
struct HdState {
  at::Tensor S;        // [B, Hkv, Df, Dv + 1], fp32 or fp64
  int64_t tokens = 0;  // tokens absorbed; 0 promises S == 0 (the state readout is skipped)

  // An empty (all-zero) state.
  static HdState zeros(int64_t batch, int64_t kv_heads, int64_t dim, int64_t value_dim,
                       at::ScalarType dtype = at::kFloat, at::Device device = at::kCPU);
  int64_t batch() const { return S.size(0); }
  int64_t kv_heads() const { return S.size(1); }
  int64_t dim() const;  // D, recovered from Df
  int64_t value_dim() const { return S.size(3) - 1; }
  // Views into S: H0 [B, Hkv, Dv+1], H1 [B, Hkv, D, Dv+1], H2 [B, Hkv, D(D+1)/2, Dv+1].
  at::Tensor h0() const;
  at::Tensor h1() const;
  at::Tensor h2() const;
  // Bytes of S.
  int64_t bytes() const;
};

// Which implementation hd_chunked / hd_extend use. `automatic` runs the CPU kernels
// (src/oal/kernels/cpu: chunked prefill; a fused step for HdDecodeState's single tokens)
// whenever hd_kernel_blocker() allows, else the ATen code of this module; `aten` forces
// the differentiable ATen implementation.
enum class HdBackend { automatic, aten };

// The fp32 kernel plan (kernels/cpu/oal_plan.h) of one layer's kernels, built at the
// first kernel call and rebuilt only when L, group_of or eps change (L's storage or
// autograd version counter moves, e.g. after an optimizer step). Thread-safe.
class OalPlanCache {
 public:
  std::shared_ptr<const kernels::cpu::OalPlan> get(const LayerKernels& kernels);

 private:
  std::mutex mutex_;
  std::shared_ptr<const kernels::cpu::OalPlan> plan_;
  const void *l_data_ = nullptr, *g_data_ = nullptr;
  int64_t l_version_ = -1, g_version_ = -1;
  double eps_ = 0;
};

struct HdOptions {
  int64_t chunk = 64;  // tokens per chunk, >= 1; need not divide T
  HdBackend backend = HdBackend::automatic;
  // Where the kernel plan of these kernels is kept between calls (QuadraticAttention
  // and its decoders share one per layer); nullptr builds it per kernel call.
  std::shared_ptr<OalPlanCache> plan_cache = nullptr;
};

struct HdPrefill {
  at::Tensor y;    // [B, Hq, T, Dv], input dtype
  HdState state;   // state after all T tokens (continues `initial` when given)
};

// ---- References --------------------------------------------------------------------
// kappa(q_i, k_j) for every pair, factored form eps + ||Lᵀ s̄||², no causal mask:
// q [B, Hq, T, D], k [B, Hkv, S, D] -> [B, Hq, T, S] in the compute dtype.
at::Tensor hd_pair_weights(const at::Tensor& q, const at::Tensor& k, const LayerKernels& kernels);
// The same weights from the expanded coefficients a + b·x + xᵀ C x (can cancel below eps
// or even below 0 in floating point when coordinates are large; for tests/diagnostics).
at::Tensor hd_pair_weights_expanded(const at::Tensor& q, const at::Tensor& k,
                                    const LayerKernels& kernels);
// O(T²) causal reference with factored weights. Shapes as in the header comment.
at::Tensor hd_pairwise(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const LayerKernels& kernels);
// Token-by-token reference of Eq. 5-6 (H0, H1, packed symmetric H2; coefficients from
// QuadraticKernel::coefficients()). Slow; for tests.
at::Tensor hd_recurrent(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const LayerKernels& kernels);

// ---- Linear-time evaluation ---------------------------------------------------------
// Why hd_extend will not hand these inputs to the CPU kernel ("" when it will):
// options.backend is aten, a tensor is not on the CPU, the dtype is not fp32 or bf16, the
// state is not fp32, or autograd is recording through q, k, v, kernels.L or the state.
// The kernel computes the same function in fp32 (its intra-chunk weights are the same
// factored form; tests/attention/test_op_consistency.cpp holds the tolerances).
std::string hd_kernel_blocker(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const LayerKernels& kernels, const HdState& state,
                              const HdOptions& options);

// Chunked prefill; continues `initial` when given (not modified). Differentiable w.r.t.
// q, k, v, kernels.L and initial->S. This is the dispatch point for the fast kernels.
HdPrefill hd_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const LayerKernels& kernels, const HdOptions& options = {},
                     const HdState* initial = nullptr);
// Attends T new tokens after everything in `state` and absorbs them into `state` (in
// place when no gradient is being recorded). Returns y [B, Hq, T, Dv].
at::Tensor hd_extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
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
  QkvShape check_tokens(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);
  // The kernel path for checked tokens (y = nullptr: absorb only).
  at::Tensor run_kernel(const QkvShape& s, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, bool readout);
  LayerKernels kernels_;
  int64_t batch_;
  HdOptions options_;
  std::optional<HdState> state_;
  std::unique_ptr<kernels::cpu::OalDecodeWorkspace> ws_;  // sized for state_
};

}  // namespace oal::attn
