#include "oal/train/chunked_nll.h"

#include <torch/csrc/autograd/custom_function.h>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"
#include "oal/model/frozen_linear.h"

namespace oal::train {
namespace {

constexpr const char* k_op = "chunked_nll";

void check_inputs(const at::Tensor& hidden, const at::Tensor& head, const at::Tensor& targets) {
  check(hidden.defined() && hidden.dim() == 2 && hidden.scalar_type() == at::kFloat, k_op,
        "hidden: expected fp32 [positions, hidden], got {}", shape_str(hidden));
  check(head.defined() && head.dim() == 2 && head.scalar_type() == at::kFloat &&
            head.size(1) == hidden.size(1),
        k_op, "head: expected fp32 [vocab, {}], got {}", hidden.size(1), shape_str(head));
  check(!head.requires_grad(), k_op, "the LM head must be frozen (it requires grad)");
  check(targets.defined() && targets.dim() == 1 && targets.scalar_type() == at::kLong &&
            targets.size(0) == hidden.size(0),
        k_op, "targets: expected int64 [{}], got {}", hidden.size(0), shape_str(targets));
  if (targets.numel() > 0) {
    const int64_t lo = targets.min().item<int64_t>(), hi = targets.max().item<int64_t>();
    check(lo >= 0 && hi < head.size(0), k_op, "targets must lie in [0, {}), got [{}, {}]",
          head.size(0), lo, hi);
  }
}

// The LM head and its transpose (for the gradient through the kernels) or undefined.
struct Head {
  at::Tensor w, w_t;  // [V, H] contiguous; [H, V] or undefined
};

// One chunk: its summed NLL, and (when `grad` is defined) d NLL / d h written into it.
//   h [m, H], y [m], grad [m, H] or undefined.
double chunk_nll(const at::Tensor& h, const Head& head, const at::Tensor& y, at::Tensor grad) {
  at::Tensor logits = head.w.device().is_cpu() ? model::kernel_product(h, head.w)
                                               : at::mm(h, head.w.t());  // [m, V]
  const at::Tensor lse = at::logsumexp(logits, 1, true);        // [m, 1]
  const at::Tensor picked = logits.gather(1, y.unsqueeze(1));   // [m, 1]
  const double nll = (lse - picked).sum().item<double>();
  if (grad.defined()) {
    // softmax − onehot, in place on the logits (they are not needed any more).
    logits.sub_(lse).exp_();
    logits.scatter_add_(1, y.unsqueeze(1), at::full({y.size(0), 1}, -1.0f, logits.options()));
    if (head.w_t.defined() && head.w.device().is_cpu())
      grad.copy_(model::kernel_product(logits, head.w_t));
    else at::mm_out(grad, logits, head.w);
  }
  return nll;
}

struct ChunkedNll : torch::autograd::Function<ChunkedNll> {
  // The head travels as a non-tensor argument: it gets no gradient, and head_t may be
  // undefined, which apply() does not take as a tensor input.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden,
                            const Head* head, const at::Tensor& targets, int64_t chunk) {
    const int64_t M = hidden.size(0);
    const bool want_grad = hidden.requires_grad();
    at::Tensor grad = want_grad ? at::empty({M, hidden.size(1)}, hidden.options()) : at::Tensor();
    const at::Tensor h = hidden.contiguous();
    double total = 0;
    for (int64_t i = 0; i < M; i += chunk) {
      const int64_t m = std::min(chunk, M - i);
      total += chunk_nll(h.narrow(0, i, m), *head, targets.narrow(0, i, m),
                         want_grad ? grad.narrow(0, i, m) : at::Tensor());
    }
    if (want_grad) ctx->save_for_backward({grad});
    return at::scalar_tensor(total, hidden.options());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const at::Tensor grad = ctx->get_saved_variables()[0];
    return {grad * grad_out[0], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor chunked_nll_sum(const at::Tensor& hidden, const at::Tensor& head,
                           const at::Tensor& targets, int64_t chunk, const at::Tensor& head_t) {
  check_inputs(hidden, head, targets);
  check(chunk >= 1, k_op, "chunk must be >= 1 position, got {}", chunk);
  check(!head_t.defined() || (head_t.scalar_type() == at::kFloat && head_t.is_contiguous() &&
                              head_t.sizes() == head.t().sizes()),
        k_op, "head_t: expected contiguous fp32 [{}, {}], got {}", head.size(1), head.size(0),
        shape_str(head_t));
  const Head h{head.contiguous(), head_t};
  if (!(hidden.requires_grad() && at::GradMode::is_enabled())) {
    at::NoGradGuard no_grad;
    return ChunkedNll::forward(nullptr, hidden.detach(), &h, targets, chunk);
  }
  return ChunkedNll::apply(hidden, &h, targets, chunk);
}

}  // namespace oal::train
