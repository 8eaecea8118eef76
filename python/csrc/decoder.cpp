// torch.classes.oal.Decoder: OAL decoding that keeps its attn::HdDecodeState between
// steps (python/oal/modules.py DecodeState.step uses it when nothing records gradients).
// The functional oal::step builds a decoder per call (validates the kernels, looks up the
// plan, clones the state) so that its state argument stays untouched and autograd can
// replay it; inference needs none of that after the first token.
//
//   Decoder(group_of, L, eps, state)   kernels as in layer_kernels_arg.h; state
//                                      [B, Hkv, Df, Dv+1] (copied once, then owned)
//   decoder.step(q, k, v) -> y         q [B, Hq, D], k [B, Hkv, D], v [B, Hkv, Dv] ->
//                                      y [B, Hq, Dv]; the state absorbs the token in place
//   decoder.state() -> S               the state after the last step (the decoder's own
//                                      tensor: the next step updates it)
#include <torch/custom_class.h>
#include <torch/library.h>

#include "layer_kernels_arg.h"
#include "oal/attention/oal/chunked_attention.h"
#include "oal/core/error.h"

namespace oal::python {
namespace {

constexpr const char* k_op = "oal_decoder";

attn::HdState initial_state(const at::Tensor& S) {
  check(S.defined() && S.dim() == 4, k_op, "state must be [B, Hkv, Df, Dv+1], got {}-dim",
        S.defined() ? S.dim() : 0);
  attn::HdState st;
  st.S = S.detach();
  st.tokens = 1;  // a caller's tensor may hold tokens: never skip its readout
  return st;
}

struct Decoder : torch::CustomClassHolder {
  Decoder(const at::Tensor& group_of, const at::Tensor& L, double eps, const at::Tensor& state)
      : dec(layer_kernels(k_op, group_of.detach(), L.detach(), eps,
                          group_of.dim() == 2 ? group_of.size(1) : 0),
            initial_state(state)) {}

  at::Tensor step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    check(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, k_op,
          "expected q [B, Hq, D], k [B, Hkv, D], v [B, Hkv, Dv]; got {}-, {}- and {}-dim",
          q.dim(), k.dim(), v.dim());
    at::NoGradGuard no_grad;
    return dec.extend(q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2)).squeeze(2);
  }

  at::Tensor state() const { return dec.state()->S; }

  attn::HdDecodeState dec;
};

}  // namespace
}  // namespace oal::python

TORCH_LIBRARY_FRAGMENT(oal, m) {
  m.class_<oal::python::Decoder>("Decoder")
      .def(torch::init<at::Tensor, at::Tensor, double, at::Tensor>())
      .def("step", &oal::python::Decoder::step)
      .def("state", &oal::python::Decoder::state);
}
