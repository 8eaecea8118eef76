// OAL attention as PyTorch dispatcher ops (namespace `oal`), the core of the Python
// package (python/oal/ops.py wraps them):
//
//   oal::attention(q, k, v, group_of, L, eps, chunk, state?) -> (y, state')
//       q [B, Hq, T, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv] -> y [B, Hq, T, Dv];
//       state [B, Hkv, Df, Dv+1] (recurrent_state.h layout; fp32, fp64 for fp64 inputs) is the HD
//       state before the first token (None: empty), state' the state after the last.
//       Chunked prefill, or extend when a state is given (attn::hd_chunked).
//   oal::step(q, k, v, group_of, L, eps, state) -> (y, state')
//       one token: q [B, Hq, D], k [B, Hkv, D], v [B, Hkv, Dv] -> y [B, Hq, Dv]
//       (the fused decode kernel of attn::HdDecodeState).
//   oal::simd_path(q, k, v, state?) -> str
//       which path the forward takes for these inputs, e.g. "simd (avx2)".
//   oal::reference(q, k, v, group_of, L, eps, kind) -> y
//       the C++ references: kind "pairwise" (O(T²), factored weights), "recurrent"
//       (token by token, Eq. 5-6) or "aten" (the chunked ATen code, chunk 64).
//
// Both attention ops are functional (the state passed in is never modified) and
// differentiable w.r.t. q, k, v, L and the state. Forward runs the C++ fast path (the
// CPU kernels for fp32/bf16 CPU inputs, else the ATen code) without recording a graph
// and keeps only its inputs; backward re-evaluates the same function with the
// differentiable ATen code and back-propagates through it. So training memory between
// forward and backward is the inputs (not the [T, Df] features of every chunk), for
// the price of one extra (fast) forward per step. Errors are the C++ core's oal::Error
// messages (Python sees them as RuntimeError; python/oal/errors.py re-raises oal.Error).
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "layer_kernels_arg.h"
#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/references.h"
#include "oal/attention/simd_path.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::python {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The state argument as an HdState: tokens = 1 because a caller's tensor may hold
// tokens (0 would promise an all-zero state and skip its readout).
attn::HdState as_state(const at::Tensor& S) {
  attn::HdState st;
  st.S = S;
  st.tokens = 1;
  return st;
}

// One evaluation of the function, on any path the options allow. `step`: q, k, v are
// single tokens ([B, H, D]) and a state is given.
std::pair<at::Tensor, at::Tensor> evaluate(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, const attn::LayerKernels& lk,
                                           int64_t chunk, const at::Tensor& state, bool step,
                                           attn::HdBackend backend) {
  attn::HdOptions o;
  o.chunk = chunk;
  o.backend = backend;
  if (step) {
    check(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, "oal_step",
          "expected q [B, Hq, D], k [B, Hkv, D], v [B, Hkv, Dv]; got {}-, {}- and {}-dim",
          q.dim(), k.dim(), v.dim());
    if (backend == attn::HdBackend::automatic) {
      // The decoder runs the fused one-token kernel when it can (on its own copy).
      attn::HdDecodeState dec(lk, as_state(state), o);
      at::Tensor y = dec.extend(q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2)).squeeze(2);
      return {y, dec.state()->S};
    }
    attn::HdState st = as_state(state);
    attn::HdPrefill out =
        attn::hd_chunked(q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2), lk, o, &st);
    return {out.y.squeeze(2), out.state.S};
  }
  attn::HdPrefill out;
  if (state.defined()) {
    attn::HdState st = as_state(state);
    out = attn::hd_chunked(q, k, v, lk, o, &st);
  } else {
    out = attn::hd_chunked(q, k, v, lk, o);
  }
  return {out.y, out.state.S};
}

int64_t head_dim_of(const at::Tensor& q) { return q.dim() >= 1 ? q.size(-1) : 0; }

// A fresh leaf that records gradients (undefined stays undefined).
at::Tensor grad_leaf(const at::Tensor& t) {
  if (!t.defined()) return t;
  return t.detach().requires_grad_(true);
}

struct OalAttentionFn : public torch::autograd::Function<OalAttentionFn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, const at::Tensor& group_of,
                               const at::Tensor& L, double eps, int64_t chunk,
                               const c10::optional<at::Tensor>& state, bool step) {
    const std::string_view op = step ? "oal_step" : "oal_attention";
    const attn::LayerKernels lk = layer_kernels(op, group_of, L, eps, head_dim_of(q));
    const at::Tensor S0 = state.has_value() ? *state : at::Tensor();
    if (S0.defined()) check_dim(S0, 4, op, "state [B, Hkv, Df, Dv+1]");
    ctx->set_materialize_grads(false);  // an unused output's gradient stays undefined
    auto [y, S] = evaluate(q, k, v, lk, chunk, S0, step, attn::HdBackend::automatic);
    ctx->save_for_backward({q, k, v, group_of, L, S0});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["step"] = step;
    return {y, S};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // The gradients below are computed on detached copies: a graph built from them
    // would not reach the caller's tensors, so refuse instead of returning wrong ones.
    check(!at::GradMode::is_enabled(), "oal_attention",
          "double backward (create_graph=True) is not supported");
    const auto saved = ctx->get_saved_variables();
    const double eps = ctx->saved_data["eps"].toDouble();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const bool step = ctx->saved_data["step"].toBool();
    at::Tensor q = grad_leaf(saved[0]), k = grad_leaf(saved[1]), v = grad_leaf(saved[2]);
    at::Tensor L = grad_leaf(saved[4]), S0 = grad_leaf(saved[5]);
    const attn::LayerKernels lk = layer_kernels("oal_attention backward", saved[3], L, eps,
                                                head_dim_of(q));
    variable_list outputs, grad_outputs;
    {
      at::AutoGradMode enable(true);
      auto [y, S] = evaluate(q, k, v, lk, chunk, S0, step, attn::HdBackend::aten);
      if (grads[0].defined()) outputs.push_back(y), grad_outputs.push_back(grads[0]);
      if (grads[1].defined()) outputs.push_back(S), grad_outputs.push_back(grads[1]);
    }
    variable_list inputs{q, k, v, L};
    if (S0.defined()) inputs.push_back(S0);
    variable_list g(inputs.size());
    if (!outputs.empty())
      g = torch::autograd::grad(outputs, inputs, grad_outputs, /*retain_graph=*/false,
                                /*create_graph=*/false, /*allow_unused=*/true);
    // One entry per forward argument: q, k, v, group_of, L, eps, chunk, state, step.
    return {g[0], g[1], g[2], at::Tensor(), g[3], at::Tensor(), at::Tensor(),
            S0.defined() ? g[4] : at::Tensor(), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> oal_attention(const at::Tensor& q, const at::Tensor& k,
                                                 const at::Tensor& v,
                                                 const at::Tensor& group_of,
                                                 const at::Tensor& L, double eps, int64_t chunk,
                                                 const c10::optional<at::Tensor>& state) {
  auto out = OalAttentionFn::apply(q, k, v, group_of, L, eps, chunk, state, false);
  return {out[0], out[1]};
}

std::tuple<at::Tensor, at::Tensor> oal_step(const at::Tensor& q, const at::Tensor& k,
                                            const at::Tensor& v, const at::Tensor& group_of,
                                            const at::Tensor& L, double eps,
                                            const at::Tensor& state) {
  auto out = OalAttentionFn::apply(q, k, v, group_of, L, eps, int64_t{1},
                                   c10::optional<at::Tensor>(state), true);
  return {out[0], out[1]};
}

std::string oal_simd_path(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& state) {
  // The ops' forward runs without recording (the graph is rebuilt in backward), so
  // only devices and dtypes decide, not whether q, k, v or L require gradients.
  at::NoGradGuard no_grad;
  attn::LayerKernels lk;
  attn::HdState st;
  st.S = state.has_value() ? *state : at::zeros({1}, q.options().dtype(at::kFloat));
  return attn::simd_path(attn::hd_simd_blocker(q, k, v, lk, st, {}));
}

at::Tensor oal_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const at::Tensor& group_of, const at::Tensor& L, double eps,
                         c10::string_view kind) {
  const std::string_view op = "oal_reference";
  const attn::LayerKernels lk = layer_kernels(op, group_of, L, eps, head_dim_of(q));
  if (kind == "pairwise") return attn::hd_pairwise(q, k, v, lk);
  if (kind == "recurrent") return attn::hd_recurrent(q, k, v, lk);
  if (kind == "aten") {
    attn::HdOptions o;
    o.backend = attn::HdBackend::aten;
    return attn::hd_chunked(q, k, v, lk, o).y;
  }
  fail(op, "kind must be 'pairwise', 'recurrent' or 'aten', got '{}'", std::string(kind));
}

}  // namespace
}  // namespace oal::python

TORCH_LIBRARY(oal, m) {
  m.def("attention(Tensor q, Tensor k, Tensor v, Tensor group_of, Tensor L, float eps=1e-6, "
        "int chunk=64, Tensor? state=None) -> (Tensor, Tensor)",
        &oal::python::oal_attention);
  m.def("step(Tensor q, Tensor k, Tensor v, Tensor group_of, Tensor L, float eps, "
        "Tensor state) -> (Tensor, Tensor)",
        &oal::python::oal_step);
  m.def("simd_path(Tensor q, Tensor k, Tensor v, Tensor? state=None) -> str",
        &oal::python::oal_simd_path);
  m.def("reference(Tensor q, Tensor k, Tensor v, Tensor group_of, Tensor L, float eps, "
        "str kind) -> Tensor",
        &oal::python::oal_reference);
}
