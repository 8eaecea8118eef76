#include "oal/model/linear.h"

#include <fmt/core.h>

#include "oal/attention/simd_path.h"
#include "oal/core/error.h"
#include "oal/io/gguf_quants.h"
#include "oal/model/frozen_linear.h"
#include "oal/simd/linear_f32.h"
#include "oal/simd/linear_quant.h"

namespace oal::model {
namespace {

// The CPU projection kernel takes fp32 CPU inputs without autograd (training and other
// devices keep at::linear, which is differentiable).
bool simd_can_run(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return x.device().is_cpu() && w.device().is_cpu() && x.scalar_type() == at::kFloat &&
         x.numel() > 0 && !attn::records_grad(x) && !attn::records_grad(w) &&
         !attn::records_grad(b) &&
         (!b.defined() || b.scalar_type() == at::kFloat);
}

// The data of a contiguous fp32 bias, or null for none.
const float* bias_data(const at::Tensor& bias) {
  return bias.defined() ? bias.data_ptr<float>() : nullptr;
}

at::Tensor contiguous_bias(const at::Tensor& bias) {
  return bias.defined() ? bias.contiguous() : bias;
}

// x [M, K] through the quantized weight (decode passes by `dot`): the kernel when x is a
// CPU fp32 tensor without autograd, else at::linear on the decoded weight.
at::Tensor quant_forward(const QuantWeight& q, simd::QuantDot dot, const at::Tensor& x,
                         const at::Tensor& bias) {
  const bool kernel = x.device().is_cpu() && x.scalar_type() == at::kFloat && x.numel() > 0 &&
                      !attn::records_grad(x) && !attn::records_grad(bias) &&
                      (!bias.defined() || bias.scalar_type() == at::kFloat);
  if (!kernel) {
    const at::Tensor w = q.dequantize().to(x.device()).to(x.scalar_type());
    return bias.defined() ? at::linear(x, w, bias) : at::linear(x, w);
  }
  const at::Tensor xc = x.contiguous();
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = q.rows;
  at::Tensor y = at::empty(shape, xc.options());
  const at::Tensor b = contiguous_bias(bias);
  simd::linear_quant(xc.numel() / q.cols, xc.data_ptr<float>(), q.view(), bias_data(b),
                     y.data_ptr<float>(), dot);
  return y;
}

// A bf16 / f16 weight the quantized-weight kernels read as stored (CPU, contiguous, rows
// of whole groups of 32, no autograd): a decode step streams 2 bytes per weight instead
// of widening the whole matrix to fp32 first. Its view as ggml BF16 / F16 rows.
bool half_weight_ready(const at::Tensor& w) {
  return w.device().is_cpu() && w.dim() == 2 && w.is_contiguous() && w.size(1) % 32 == 0 &&
         (w.scalar_type() == at::kBFloat16 || w.scalar_type() == at::kHalf) &&
         !attn::records_grad(w);
}
simd::QuantMatrix half_view(const at::Tensor& w) {
  const auto type = w.scalar_type() == at::kBFloat16 ? io::GgmlType::BF16 : io::GgmlType::F16;
  return {static_cast<uint32_t>(type), w.size(0), w.size(1),
          static_cast<const uint8_t*>(w.data_ptr())};
}

// x [..., in] through the dense weight: the projection kernel when it can run (the
// quantized-weight kernels for a bf16 / f16 weight), else at::linear.
at::Tensor dense_forward(const at::Tensor& weight, const at::Tensor& x, const at::Tensor& bias) {
  if (half_weight_ready(weight) && simd_can_run(x, weight, bias) && x.size(-1) == weight.size(1)) {
    const at::Tensor xc = x.contiguous();
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    at::Tensor y = at::empty(shape, xc.options());
    const at::Tensor b = contiguous_bias(bias);
    simd::linear_quant(xc.numel() / weight.size(1), xc.data_ptr<float>(), half_view(weight),
                       bias_data(b), y.data_ptr<float>());
    return y;
  }
  const at::Tensor w =
      weight.scalar_type() == x.scalar_type() ? weight : weight.to(x.scalar_type());
  if (!simd_can_run(x, w, bias)) return bias.defined() ? at::linear(x, w, bias) : at::linear(x, w);
  const at::Tensor xc = x.contiguous(), wc = w.contiguous();
  const int64_t K = w.size(1), N = w.size(0), M = xc.numel() / K;
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = N;
  at::Tensor y = at::empty(shape, xc.options());
  const at::Tensor b = contiguous_bias(bias);
  simd::linear_f32(M, N, K, xc.data_ptr<float>(), wc.data_ptr<float>(), bias_data(b),
                           y.data_ptr<float>());
  return y;
}

}  // namespace

at::Tensor Linear::dense_weight() const {
  return quant.defined() ? quant.dequantize() : weight.to(at::kFloat);
}

int64_t Linear::nbytes() const {
  auto bytes = [](const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; };
  return bytes(quant.bytes) + bytes(weight) + bytes(bias);
}

at::Tensor Linear::forward(const at::Tensor& x) const {
  if (quant.defined())
    check(x.size(-1) == quant.cols, "linear", "input has {} features, the weight expects {}",
          x.size(-1), quant.cols);
  at::Tensor y = frozen_linear_ready(*this, x) ? frozen_linear(x, *this)
                 : quant.defined()               ? quant_forward(quant, quant_dot, x, bias)
                                                 : dense_forward(weight, x, bias);
  if (delta) y = y + delta->apply(x);
  return y;
}

std::string Linear::simd_blocker() const {
  if (delta) return "an adapter is attached (its sum runs through ATen)";
  return weight_blocker();
}

std::string Linear::weight_blocker() const {
  if (attn::records_grad(bias)) return "autograd is recording through the bias";
  if (bias.defined() && (!bias.device().is_cpu() || bias.scalar_type() != at::kFloat ||
                         !bias.is_contiguous()))
    return "the bias is not contiguous fp32 on the CPU";
  if (quant.defined() || half_weight_ready(weight)) return "";
  if (!weight.device().is_cpu()) return "the weight is not on the CPU";
  if (attn::records_grad(weight)) return "autograd is recording through the weight";
  if (weight.scalar_type() == at::kBFloat16 || weight.scalar_type() == at::kHalf)
    return "a 16-bit weight whose rows are not whole groups of 32 (or not contiguous)";
  if (weight.scalar_type() != at::kFloat)
    return std::string("weight dtype ") + c10::toString(weight.scalar_type());
  if (!weight.is_contiguous()) return "the weight is not contiguous";
  return "";
}

bool Linear::simd_ready() const { return simd_blocker().empty(); }

attn::PathChoice Linear::cpu_path() const {
  std::string detail;
  if (quant.defined()) {
    const std::string type = io::ggml_type_name(quant.type);
    if (!simd::has_fast_quant_path(quant.type))
      return {false, type + " rows", type + " has no SIMD decoder (scalar, one row at a time)"};
    detail = simd::has_int8_path(quant.type)
                 ? fmt::format("{} blocks, {} dot when decoding", type,
                               simd::quant_dot_name(quant_dot))
                 : type + " blocks decoded in registers";
  } else if (half_weight_ready(weight)) {
    detail = std::string(c10::toString(weight.scalar_type())) + " rows widened in registers";
  } else {
    detail = fmt::format("fp32 GEMM ({} for prompts)",
                         simd::linear_f32_on_blas() ? "BLAS" : "own micro-kernel");
  }
  if (delta) detail += " + adapter (ATen)";
  return attn::path_choice(std::move(detail), weight_blocker());
}

void Linear::forward_into(int64_t M, const float* x, float* y) const {
  check(simd_ready(), "linear", "forward_into: the projection needs the ATen path (an adapter, "
        "autograd, or a weight that is not quantized, fp32 or bf16/f16 on the CPU)");
  if (quant.defined() || weight.scalar_type() != at::kFloat) {
    simd::linear_quant(M, x, quant.defined() ? quant.view() : half_view(weight), bias_data(bias),
                       y, quant_dot);
    return;
  }
  simd::linear_f32(M, weight.size(0), weight.size(1), x, weight.data_ptr<float>(),
                           bias_data(bias), y);
}

}  // namespace oal::model
