#include "oal/model/linear.h"

#include "oal/attention/kernel_blocker.h"
#include "oal/kernels/cpu/linear_f32.h"

namespace oal::model {
namespace {

// The CPU projection kernel takes fp32 CPU inputs without autograd (training and other
// devices keep at::linear, which is differentiable).
bool kernel_can_run(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return x.device().is_cpu() && w.device().is_cpu() && x.scalar_type() == at::kFloat &&
         x.numel() > 0 && !attn::records_grad(x) && !attn::records_grad(w) &&
         !attn::records_grad(b) &&
         (!b.defined() || b.scalar_type() == at::kFloat);
}

}  // namespace

at::Tensor Linear::forward(const at::Tensor& x) const {
  const at::Tensor w = weight.scalar_type() == x.scalar_type() ? weight : weight.to(x.scalar_type());
  at::Tensor y;
  if (kernel_can_run(x, w, bias)) {
    const at::Tensor xc = x.contiguous(), wc = w.contiguous();
    const int64_t K = in_features(), N = out_features(), M = xc.numel() / K;
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = N;
    y = at::empty(shape, xc.options());
    kernels::cpu::linear_f32(M, N, K, xc.data_ptr<float>(), wc.data_ptr<float>(),
                             bias.defined() ? bias.contiguous().data_ptr<float>() : nullptr,
                             y.data_ptr<float>());
  } else {
    y = bias.defined() ? at::linear(x, w, bias) : at::linear(x, w);
  }
  if (delta) y = y + delta->apply(x);
  return y;
}

}  // namespace oal::model
