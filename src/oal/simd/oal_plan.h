#pragma once
// OAL kernel coefficients of one layer prepared for the CPU kernels (fp32, computed once
// per layer, reused by every prefill and decode call).
//
// Feature layout (identical to the HD state of src/oal/attention/oal/recurrent_state.h): for head
// dimension d, Df = 1 + d + d(d+1)/2 monomials
//   m(x) = [1, x_r (r < d), x_r x_t (r <= t, pairs row-major: (0,0),(0,1),...,(1,1),...)]
// phiK(k) = m(k) and phiQ_h(q) = coef_h ⊙ m(q) with
//   coef_h = [a, b_r / sqrt(d), m_rt C_rt / d],  m_rt = 1 if r == t else 2,
//   a = eps + M00, b_r = 2 M_{0,g(r)+1}, C_rt = M_{g(r)+1,g(t)+1}, M = L Lᵀ,
// so phiQ_h(q) · phiK(k) = kappa_h(q, k) = eps + ||Lᵀ s̄||² (the expanded form).
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace oal::simd {

// Df for head dimension d.
inline int64_t oal_feature_dim(int64_t d) { return 1 + d + d * (d + 1) / 2; }

// m(x) into out[0, Df): x [d] fp32.
void oal_monomials(const float* x, int64_t d, float* out);
// coef ⊙ m(x) into out[0, Df).
void oal_query_features(const float* x, int64_t d, const float* coef, float* out);

struct OalPlan {
  int64_t q_heads = 0;
  int64_t dim = 0;         // d
  int64_t max_groups = 0;  // Gmax (heads with fewer groups are zero-padded)
  float eps = 0;
  std::vector<float> coef;         // [Hq, Df] query feature coefficients (above)
  std::vector<float> lower;        // [Hq, Gmax+1, Gmax+1] tril(L) as fp32
  std::vector<int64_t> perm;       // [Hq, d] dimensions ordered by group (stable)
  std::vector<int64_t> group_end;  // [Hq, Gmax] end of group g in perm order

  int64_t feature_dim() const { return oal_feature_dim(dim); }
  const float* coef_of(int64_t h) const { return coef.data() + h * feature_dim(); }
  const float* lower_of(int64_t h) const {
    return lower.data() + h * (max_groups + 1) * (max_groups + 1);
  }

  // From the per-layer batched kernels: group_of [Hq, d] integer in 0..Gmax-1, L [Hq,
  // Gmax+1, Gmax+1] floating (the strict upper triangle is ignored, as tril(L)), eps > 0.
  // Coefficients are formed in fp64 then rounded to fp32. Throws oal::Error("oal_plan")
  // on inconsistent shapes, out-of-range groups, non-finite L or eps <= 0.
  static OalPlan build(const at::Tensor& group_of, const at::Tensor& L, double eps);
};

}  // namespace oal::simd
