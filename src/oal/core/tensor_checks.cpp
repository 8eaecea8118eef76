#include "oal/core/tensor_checks.h"

#include "oal/core/error.h"

namespace oal {

std::string shape_str(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

void check_dim(const at::Tensor& t, int64_t dim, std::string_view op, std::string_view name) {
  check(t.defined(), op, "{} is undefined", name);
  check(t.dim() == dim, op, "{}: expected {} dimensions, got shape {}", name, dim, shape_str(t));
}

void check_floating(const at::Tensor& t, std::string_view op, std::string_view name) {
  check(t.defined() && at::isFloatingType(t.scalar_type()), op,
        "{}: expected a floating-point tensor, got {}", name,
        t.defined() ? std::string(c10::toString(t.scalar_type())) : "undefined");
}

void check_finite(const at::Tensor& t, std::string_view op, std::string_view name) {
  if (t.numel() == 0) return;
  check(at::isfinite(t).all().item<bool>(), op,
        "{} contains NaN or Inf (shape {}); expected finite values", name, shape_str(t));
}

}  // namespace oal
