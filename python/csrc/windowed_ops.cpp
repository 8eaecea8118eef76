// Windowed attention as a PyTorch dispatcher op (python/oal/ops.py wraps it):
//
//   oal::windowed_attention(q, k, v, group_of?, L?, eps, log_scale, sinks, window, chunk)
//       q [B, Hq, T, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv] -> y [B, Hq, T, Dv]
//       exact softmax weights on the first `sinks` tokens and the last `window` tokens of
//       each query, OAL's kernel (group_of [Hq, D], L [Hq, n, n], eps) for every older
//       key, one normaliser; log_scale [Hq] is c_h (docs/operator.md "Windowed
//       evaluation"). group_of = L = None: the windowed-only method (no kernel part).
//
// Registered CompositeImplicitAutograd: the op is the C++ WindowedAttention built from
// ATen ops and the HD evaluation, so autograd records through it (q, k, v, L and
// log_scale get gradients; the HD part then takes its differentiable ATen path) and
// inference without gradients takes the CPU kernels.
#include <torch/library.h>

#include <memory>

#include "layer_kernels_arg.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/core/error.h"

namespace oal::python {
namespace {

at::Tensor windowed_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const c10::optional<at::Tensor>& group_of,
                              const c10::optional<at::Tensor>& L, double eps,
                              const at::Tensor& log_scale, int64_t sinks, int64_t window,
                              int64_t chunk) {
  constexpr std::string_view op = "oal_windowed_attention";
  check(group_of.has_value() == L.has_value(), op,
        "group_of and L go together (both None: the windowed-only method)");
  check(q.dim() == 4, op, "expected q [B, Hq, T, D], got {}-dim", q.dim());
  std::shared_ptr<const attn::QuadraticAttention> base;
  if (L.has_value()) {
    attn::HdOptions o;
    o.chunk = chunk;
    base = std::make_shared<attn::QuadraticAttention>(
        layer_kernels(op, *group_of, *L, eps, q.size(3)), o);
  }
  const attn::WindowedAttention method(base, {sinks, window}, log_scale);
  return method.forward(q, k, v);
}

}  // namespace
}  // namespace oal::python

TORCH_LIBRARY_FRAGMENT(oal, m) {
  m.def("windowed_attention(Tensor q, Tensor k, Tensor v, Tensor? group_of, Tensor? L, "
        "float eps, Tensor log_scale, int sinks, int window, int chunk=64) -> Tensor");
  m.impl("windowed_attention", c10::DispatchKey::CompositeImplicitAutograd,
         TORCH_FN(oal::python::windowed_attention));
}
