#pragma once
// One projection of the transformer (q/k/v/o, gate/up/down, lm_head): y = x Wᵀ + b,
// plus an optional additive adapter (the hook LoRA uses: y += delta(x)).
// Kept as plain tensors so that callers can replace, wrap or train them.
#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "oal/attention/simd_path.h"
#include "oal/model/quant_weight.h"
#include "oal/simd/linear_quant.h"

namespace oal::model {

// Something added to a projection's output, e.g. a LoRA update B(A x)·scale.
class LinearDelta {
 public:
  virtual ~LinearDelta() = default;
  // x [..., in] fp32 -> [..., out] fp32.
  virtual at::Tensor apply(const at::Tensor& x) const = 0;
};

struct Linear {
  // [out, in]; fp32, or the checkpoint dtype when weights are kept narrow. Undefined
  // when `quant` holds the weight instead.
  at::Tensor weight;
  QuantWeight quant;  // the weight in a ggml block type ([out, in]), or empty
  at::Tensor bias;    // [out] fp32, or undefined
  std::shared_ptr<LinearDelta> delta;  // optional adapter, null by default
  // How a decode pass multiplies a Q8_0/Q4_0/Q4_1 weight (simd/linear_quant.h), chosen
  // once when the model is built (TransformerOptions::quant_dot).
  simd::QuantDot quant_dot = simd::QuantDot::dequant;
  // Wᵀ [in, out] fp32, or undefined: set for training by prepare_frozen_projections
  // (frozen_linear.h), which then runs forward() on inputs that record autograd.
  at::Tensor weight_t;

  int64_t in_features() const { return quant.defined() ? quant.cols : weight.size(1); }
  int64_t out_features() const { return quant.defined() ? quant.rows : weight.size(0); }
  // Where the weight lives (a quantized one: always the CPU).
  at::Device device() const { return quant.defined() ? at::Device(at::kCPU) : weight.device(); }
  // The weight as fp32 [out, in] (a quantized one decoded; a fresh tensor then).
  at::Tensor dense_weight() const;
  // Bytes the weight and bias take as held.
  int64_t nbytes() const;
  // x [..., in] fp32 -> [..., out] fp32 (one GEMM; a narrow weight is widened to fp32,
  // which is exact for bf16/fp16). Without autograd on CPU this runs the projection
  // kernel (simd/linear_f32.h: own micro-kernel or BLAS, whichever measured faster here;
  // linear_quant.h for a quantized weight, and for a bf16/fp16 one with rows of whole
  // groups of 32, widened as it is streamed); otherwise at::linear, which is
  // differentiable (a quantized weight is then decoded for the call).
  at::Tensor forward(const at::Tensor& x) const;

  // Why forward_into cannot run this projection ("" when it can): it needs no adapter,
  // the weight quantized, contiguous fp32 on the CPU, or contiguous bf16/fp16 on the CPU
  // with rows of whole groups of 32; the bias absent or fp32 on the CPU; autograd
  // recording through neither.
  std::string simd_blocker() const;
  bool simd_ready() const;  // simd_blocker() is empty
  // simd_blocker() without the adapter: what forward() asks of the weight and bias.
  std::string weight_blocker() const;
  // What an inference forward runs for this weight (attn::PathChoice): the quantized
  // kernels and their dot, the 16-bit row reader or the fp32 GEMM (an adapter's sum
  // added through ATen), or why ATen.
  attn::PathChoice cpu_path() const;
  // y[M, out] = x[M, in] Wᵀ + b on fp32 rows (x and y contiguous, not overlapping)
  // through the projection kernels, without tensors: the decode step's path
  // (decode_layer.h). Requires simd_ready().
  void forward_into(int64_t M, const float* x, float* y) const;
};

}  // namespace oal::model
