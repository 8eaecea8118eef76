#include "oal/core/tensor_checks.h"

#include <cstdint>
#include <cstring>

#include "oal/core/error.h"

namespace oal {
namespace {

// Whether the n fp32 values at p are all finite. A float is NaN or ±Inf exactly when its 8
// exponent bits are all set; an OR over that test vectorises. at::isfinite(t).all() costs
// a bool tensor and several dispatches, which a decode step paid three times per layer
// on rows of a few hundred values (docs/quantized.md, "The decode step").
bool all_finite_f32(const float* p, int64_t n) {
  constexpr uint32_t exponent = 0x7f800000u;
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + i, sizeof bits);
    bad |= static_cast<uint32_t>((bits & exponent) == exponent);
  }
  return bad == 0;
}

bool all_finite(const at::Tensor& t) {
  if (t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous())
    return all_finite_f32(t.data_ptr<float>(), t.numel());
  return at::isfinite(t).all().item<bool>();
}

}  // namespace

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
  check(all_finite(t), op,
        "{} contains NaN or Inf (shape {}); expected finite values", name, shape_str(t));
}

}  // namespace oal
