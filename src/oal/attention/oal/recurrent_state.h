#pragma once
// The recurrent state of the HD evaluation (chunked_attention.h) and the cached kernel plan its CPU
// kernels run with.
//
// HD state layout (the fast kernels implement exactly this):
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
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <mutex>

#include "oal/attention/oal/quadratic.h"
#include "oal/simd/oal_plan.h"

namespace oal::attn {

// Df = simd::oal_feature_dim(d) = 1 + d + d(d+1)/2 (2145 for d = 64).

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

// The fp32 kernel plan (simd/oal_plan.h) of one layer's kernels, built at the
// first kernel call and rebuilt only when L, group_of or eps change (L's storage or
// autograd version counter moves, e.g. after an optimizer step). Thread-safe.
class OalPlanCache {
 public:
  std::shared_ptr<const simd::OalPlan> get(const LayerKernels& kernels);

 private:
  std::mutex mutex_;
  std::shared_ptr<const simd::OalPlan> plan_;
  const void *l_data_ = nullptr, *g_data_ = nullptr;
  int64_t l_version_ = -1, g_version_ = -1;
  double eps_ = 0;
};

}  // namespace oal::attn
