#include "oal/model/frozen_linear.h"

#include <torch/csrc/autograd/custom_function.h>

#include "oal/attention/simd_path.h"
#include "oal/core/error.h"
#include "oal/model/transformer.h"
#include "oal/simd/linear_f32.h"

namespace oal::model {

at::Tensor kernel_product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  const at::Tensor xc = x.contiguous();
  const int64_t K = w.size(1), N = w.size(0), M = xc.numel() / K;
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = N;
  at::Tensor y = at::empty(shape, xc.options());
  if (M > 0)
    simd::linear_f32(M, N, K, xc.data_ptr<float>(), w.data_ptr<float>(),
                     bias.defined() ? bias.data_ptr<float>() : nullptr, y.data_ptr<float>());
  return y;
}

namespace {

struct FrozenLinear : torch::autograd::Function<FrozenLinear> {
  // The weights travel as non-differentiable arguments (apply() would record them as
  // inputs); the backward keeps a reference to Wᵀ, not a copy.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const Linear* lin) {
    ctx->saved_data["weight_t"] = lin->weight_t;
    return kernel_product(x, lin->weight, lin->bias);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    // dx = dy W = dy (Wᵀ)ᵀ: the same kernel with Wᵀ [in, out] as its weight operand.
    return {kernel_product(grad[0], ctx->saved_data["weight_t"].toTensor()), at::Tensor()};
  }
};

bool prepare(Linear& lin) {
  const at::Tensor& w = lin.weight;
  if (lin.quant.defined() || !w.defined() || !w.device().is_cpu() ||
      w.scalar_type() != at::kFloat || w.requires_grad() || w.dim() != 2)
    return false;
  if (lin.bias.defined() && (lin.bias.requires_grad() || lin.bias.scalar_type() != at::kFloat ||
                             !lin.bias.device().is_cpu()))
    return false;
  lin.weight = w.contiguous();
  if (lin.bias.defined()) lin.bias = lin.bias.contiguous();
  lin.weight_t = w.t().contiguous();
  return true;
}

}  // namespace

int64_t prepare_frozen_projections(Transformer& model) {
  int64_t n = 0;
  for (int64_t l = 0; l < model.num_layers(); ++l) {
    TransformerLayer& L = model.layer(l);
    for (Linear* p : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj, &L.up_proj,
                      &L.down_proj})
      n += prepare(*p) ? 1 : 0;
  }
  return n;
}

bool frozen_linear_ready(const Linear& lin, const at::Tensor& x) {
  return lin.weight_t.defined() && x.device().is_cpu() && x.scalar_type() == at::kFloat &&
         x.size(-1) == lin.weight.size(1) && attn::records_grad(x);
}

at::Tensor frozen_linear(const at::Tensor& x, const Linear& lin) {
  check(frozen_linear_ready(lin, x), "frozen_linear",
        "needs Wᵀ (prepare_frozen_projections) and an fp32 CPU input of {} features that "
        "records autograd, got {}", lin.weight.defined() ? lin.weight.size(1) : 0,
        c10::toString(x.scalar_type()));
  return FrozenLinear::apply(x, &lin);
}

}  // namespace oal::model
