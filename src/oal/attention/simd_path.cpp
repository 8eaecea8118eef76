#include "oal/attention/simd_path.h"

#include <c10/core/GradMode.h>

#include "oal/simd/isa.h"

namespace oal::attn {

bool records_grad(const at::Tensor& t) {
  return t.defined() && c10::GradMode::is_enabled() && t.requires_grad();
}

std::string simd_blocker(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  for (const at::Tensor* t : {&q, &k, &v})
    if (!t->device().is_cpu()) return "a tensor is not on the CPU";
  const auto dt = q.scalar_type();
  if (dt != at::kFloat && dt != at::kBFloat16)
    return std::string("dtype ") + c10::toString(dt) + " (the kernels take fp32 or bf16)";
  if (records_grad(q) || records_grad(k) || records_grad(v))
    return "autograd is recording through q, k or v";
  return "";
}

PathChoice path_choice(std::string detail, std::string blocker) {
  const bool simd = blocker.empty();
  return {simd, std::move(detail), std::move(blocker)};
}

std::string simd_path(const std::string& blocker) {
  if (blocker.empty())
    return "simd (" + simd::target_name(simd::active_target()) + ")";
  return "reference (" + blocker + ")";
}

}  // namespace oal::attn
