#include "oal/attention/oal/recurrent_state.h"

#include <cmath>

#include "oal/attention/oal/feature_map.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {

// ---- HdState -------------------------------------------------------------------------

HdState HdState::zeros(int64_t batch, int64_t kv_heads, int64_t dim, int64_t value_dim,
                       at::ScalarType dtype, at::Device device) {
  check(batch >= 1 && kv_heads >= 1 && dim >= 1 && value_dim >= 1, "hd_state",
        "batch, KV heads, D and Dv must be >= 1, got {}, {}, {}, {}", batch, kv_heads, dim,
        value_dim);
  check(dtype == at::kFloat || dtype == at::kDouble, "hd_state",
        "state dtype must be fp32 or fp64, got {}", c10::toString(dtype));
  HdState st;
  st.S = at::zeros({batch, kv_heads, simd::oal_feature_dim(dim), value_dim + 1},
                   at::TensorOptions().dtype(dtype).device(device));
  return st;
}

int64_t HdState::dim() const {
  // Df = 1 + d + d(d+1)/2  =>  d² + 3d + 2 - 2 Df = 0.
  int64_t df = S.size(2);
  auto d = static_cast<int64_t>(std::llround((-3.0 + std::sqrt(1.0 + 8.0 * df)) / 2.0));
  check(simd::oal_feature_dim(d) == df, "hd_state", "feature size {} is not 1 + d + d(d+1)/2", df);
  return d;
}

at::Tensor HdState::h0() const { return S.select(2, 0); }
at::Tensor HdState::h1() const { return S.narrow(2, 1, dim()); }
at::Tensor HdState::h2() const {
  int64_t d = dim();
  return S.narrow(2, 1 + d, d * (d + 1) / 2);
}
int64_t HdState::bytes() const {
  return S.defined() ? S.numel() * static_cast<int64_t>(S.element_size()) : 0;
}

std::shared_ptr<const simd::OalPlan> OalPlanCache::get(const LayerKernels& lk) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool same = plan_ && l_data_ == lk.L.data_ptr() && l_version_ == lk.L._version() &&
                    g_data_ == lk.group_of.data_ptr() &&
                    g_version_ == lk.group_of._version() && eps_ == lk.eps;
  if (!same) {
    plan_ = std::make_shared<const simd::OalPlan>(
        simd::OalPlan::build(lk.group_of, lk.L.detach(), lk.eps));
    l_data_ = lk.L.data_ptr();
    l_version_ = lk.L._version();
    g_data_ = lk.group_of.data_ptr();
    g_version_ = lk.group_of._version();
    eps_ = lk.eps;
  }
  return plan_;
}

}  // namespace oal::attn
