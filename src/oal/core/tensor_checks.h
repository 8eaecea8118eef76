#pragma once
// Argument checks shared by every operation on tensors. Each throws oal::Error
// naming `op` and what was expected.
#include <ATen/ATen.h>

#include <string_view>

namespace oal {

// Expects a tensor of exactly `dim` dimensions.
void check_dim(const at::Tensor& t, int64_t dim, std::string_view op, std::string_view name);
// Expects a floating-point tensor (fp64, fp32, bf16 or fp16).
void check_floating(const at::Tensor& t, std::string_view op, std::string_view name);
// Expects no NaN or Inf anywhere in `t`.
void check_finite(const at::Tensor& t, std::string_view op, std::string_view name);
// "[2, 3, 4]" for messages.
std::string shape_str(const at::Tensor& t);

}  // namespace oal
