// The other dispatcher ops of the Python package (namespace `oal`, beside oal_ops.cpp):
//
//   oal::softmax_attention(q, k, v, scale=None) -> y
//       exact causal softmax attention with GQA: q [B, Hq, T, D], k [B, Hkv, S, D],
//       v [B, Hkv, S, Dv], S >= T (the queries are the last T positions). Forward: the
//       flash CPU kernel for fp32/bf16 CPU inputs, else the tiled ATen code; backward
//       re-evaluates the plain ATen reference and back-propagates through it (only the
//       inputs are kept between forward and backward).
//   oal::apply_env() -> ()
//       applies OAL_SIMD and OAL_GEMM as the CLI does at start (`import oal` calls it).
//   oal::taylor_lower(num_groups, eps=1e-6) -> L
//       L [G+1, G+1] fp64 of the Taylor kernel 1 + s + s²/2 for G groups
//       (attn::QuadraticKernel::taylor, paper App. D): the package's starting kernels,
//       from the one implementation the CLI's calibration uses.
//   oal::read_kernels(path) -> str
//       a kernel JSON file in our format or the official release layout, returned in our
//       format ("oal-kernels" v1, docs/formats.md) as a JSON string for Python to parse.
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "oal/attention/oal/kernel_json.h"
#include "oal/attention/oal/quadratic.h"
#include "oal/attention/simd_path.h"
#include "oal/attention/softmax/softmax.h"
#include "oal/core/error.h"
#include "oal/simd/gemm_choice.h"
#include "oal/simd/isa.h"

namespace oal::python {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::optional<double> scale_of(const c10::optional<double>& s) {
  return s.has_value() ? std::optional<double>(*s) : std::nullopt;
}

struct SoftmaxFn : public torch::autograd::Function<SoftmaxFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, c10::optional<double> scale) {
    ctx->save_for_backward({q, k, v});
    ctx->saved_data["scale"] = scale.has_value() ? c10::IValue(*scale) : c10::IValue();
    if (attn::simd_blocker(q, k, v).empty())
      return attn::softmax_attention_flash(q, k, v, scale_of(scale));
    return attn::softmax_attention_tiled(q, k, v, 128, scale_of(scale));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    check(!at::GradMode::is_enabled(), "softmax_attention",
          "double backward (create_graph=True) is not supported");
    const auto saved = ctx->get_saved_variables();
    const c10::IValue s = ctx->saved_data["scale"];
    const std::optional<double> scale =
        s.isNone() ? std::nullopt : std::optional<double>(s.toDouble());
    variable_list inputs;
    for (int i = 0; i < 3; ++i) inputs.push_back(saved[i].detach().requires_grad_(true));
    at::Tensor y;
    {
      at::AutoGradMode enable(true);
      y = attn::softmax_attention_naive(inputs[0], inputs[1], inputs[2], scale);
    }
    auto g = torch::autograd::grad({y}, inputs, {grads[0]}, false, false, true);
    return {g[0], g[1], g[2], at::Tensor()};
  }
};

at::Tensor softmax_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             c10::optional<double> scale) {
  return SoftmaxFn::apply(q, k, v, scale);
}

void apply_env() {
  simd::apply_simd_env();
  simd::apply_gemm_env();
}

at::Tensor taylor_lower(int64_t num_groups, double eps) {
  check(num_groups >= 1, "taylor_lower", "num_groups must be >= 1, got {}", num_groups);
  std::vector<std::vector<int64_t>> groups(static_cast<size_t>(num_groups));
  for (int64_t g = 0; g < num_groups; ++g) groups[static_cast<size_t>(g)] = {g};
  return attn::QuadraticKernel::taylor(std::move(groups), eps).lower();
}

std::string read_kernels(c10::string_view path) {
  return attn::kernels_to_json(attn::read_kernels(std::string(path))).dump();
}

}  // namespace
}  // namespace oal::python

TORCH_LIBRARY_FRAGMENT(oal, m) {
  m.def("softmax_attention(Tensor q, Tensor k, Tensor v, float? scale=None) -> Tensor",
        &oal::python::softmax_attention);
  m.def("taylor_lower(int num_groups, float eps=1e-06) -> Tensor", &oal::python::taylor_lower);
  m.def("read_kernels(str path) -> str", &oal::python::read_kernels);
  m.def("apply_env() -> ()", &oal::python::apply_env);
}
