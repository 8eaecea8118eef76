#include "oal/calib/method_factory.h"

#include "oal/attention/dijiang.h"
#include "oal/attention/oal_method.h"
#include "oal/attention/performer.h"
#include "oal/attention/softmax_method.h"
#include "oal/attention/spectraformer.h"
#include "oal/attention/taylorshift.h"
#include "oal/core/error.h"

namespace oal::calib {

std::shared_ptr<attn::AttentionMethod> make_quadratic_method(
    const std::vector<attn::QuadraticKernel>& kernels) {
  return std::make_shared<attn::QuadraticAttention>(
      attn::QuadraticAttention::from_kernels(kernels, {}, false));
}

std::shared_ptr<attn::AttentionMethod> make_method(const std::string& name,
                                                   const MethodShape& s, uint64_t seed,
                                                   const attn::ModelKernels* kernels) {
  check(s.q_heads > 0 && s.kv_heads > 0 && s.head_dim > 0, "make_method",
        "bad layer shape: {} query heads, {} KV heads, head dim {}", s.q_heads, s.kv_heads,
        s.head_dim);
  if (name == "softmax") return std::make_shared<attn::SoftmaxAttention>();
  if (name == "oal" || name == "global") {
    if (kernels) return make_quadratic_method(kernels->layer(s.layer));
    check(name == "global", "make_method", "method 'oal' needs fitted kernels for layer {}",
          s.layer);
    std::vector<attn::QuadraticKernel> taylor(
        s.q_heads, attn::QuadraticKernel::taylor(attn::QuadraticKernel::single_group(s.head_dim)));
    return make_quadratic_method(taylor);
  }
  if (name == "taylorshift") return attn::TaylorShiftAttention::init(s.q_heads, s.kv_heads, s.head_dim);
  if (name == "performer")
    return attn::PerformerAttention::init(s.q_heads, s.kv_heads, s.head_dim, s.layer, seed);
  if (name == "dijiang")
    return attn::DiJiangAttention::init(s.q_heads, s.kv_heads, s.head_dim, s.layer, seed);
  if (name == "spectraformer")
    return attn::SpectraFormerAttention::init(s.q_heads, s.kv_heads, s.head_dim, s.layer, seed);
  fail("make_method", "unknown method '{}' (known: softmax, oal, global, taylorshift, "
       "performer, dijiang, spectraformer)", name);
}

}  // namespace oal::calib
