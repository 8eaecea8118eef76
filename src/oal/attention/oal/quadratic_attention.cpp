#include "oal/attention/oal/quadratic_attention.h"

#include <fmt/core.h>

#include "oal/attention/kernel_train.h"
#include "oal/attention/method_names.h"
#include "oal/core/fnv1a.h"

namespace oal::attn {

QuadraticAttention::QuadraticAttention(LayerKernels kernels, HdOptions options, bool trainable)
    : kernels_(std::move(kernels)), options_(std::move(options)) {
  kernels_.validate("quadratic_attention");
  options_.kernels_validated = true;  // once here, not at every forward
  // One plan per layer, shared by forward() and every decoder of this method.
  if (!options_.plan_cache) options_.plan_cache = std::make_shared<OalPlanCache>();
  if (trainable && !kernels_.L.requires_grad()) kernels_.L.set_requires_grad(true);
}

QuadraticAttention QuadraticAttention::from_kernels(const std::vector<QuadraticKernel>& kernels,
                                                    HdOptions options, bool trainable,
                                                    at::ScalarType dtype) {
  return QuadraticAttention(LayerKernels::from(kernels, dtype), options, trainable);
}

std::string QuadraticAttention::name() const {
  return kernels_.all_global() ? names::global : names::oal;
}

at::Tensor QuadraticAttention::forward(const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v) const {
  // Training on the CPU: the blocked kernel that recomputes its weights in the backward
  // (O(N) memory; kernel_train.h), unless the ATen path was asked for or the sequence is
  // long enough for the linear-time chunked form (hd_chunked under autograd).
  // (S = W = 0: no exact part, so c_h is a placeholder.)
  if (options_.backend != HdBackend::aten && q.dim() == 4 &&
      q.size(2) < options_.chunked_train_from &&
      kernel_train_ready(q, k, v, &kernels_, at::Tensor()))
    return kernel_attention_train(q, k, v, &kernels_, at::zeros({kernels_.heads()}, at::kFloat),
                                  Window{});
  return hd_chunked(q, k, v, kernels_, options_).y;
}

std::unique_ptr<DecodeState> QuadraticAttention::new_state(int64_t batch) const {
  return std::make_unique<HdDecodeState>(kernels_, batch, options_);
}

std::string QuadraticAttention::fingerprint() const {
  uint64_t h = k_fnv1a_offset;
  for (const at::Tensor& t :
       {kernels_.L.detach().to(at::kDouble), kernels_.group_of.to(at::kDouble)}) {
    const at::Tensor c = t.to(at::kCPU).contiguous();
    fnv1a(h, c.data_ptr<double>(), static_cast<size_t>(c.numel()) * sizeof(double));
  }
  fnv1a(h, &kernels_.eps, sizeof(double));
  return fmt::format("{}:{:016x}", name(), h);
}

std::vector<at::Tensor> QuadraticAttention::parameters() const {
  return kernels_.L.requires_grad() ? std::vector<at::Tensor>{kernels_.L}
                                    : std::vector<at::Tensor>{};
}

PathChoice QuadraticAttention::cpu_path() const {
  return path_choice(fmt::format("HD state, chunks of {} tokens (prefill) and one fused step "
                                 "(decode), up to {} groups per head",
                                 options_.chunk, kernels_.max_groups()),
                     hd_method_blocker(kernels_, options_));
}

}  // namespace oal::attn
