#include "oal/train/chunked_nll.h"

#include <torch/csrc/autograd/custom_function.h>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

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

// One chunk: its summed NLL, and (when `grad` is defined) d NLL / d h written into it.
//   h [m, H], head [V, H], y [m], grad [m, H] or undefined.
double chunk_nll(const at::Tensor& h, const at::Tensor& head, const at::Tensor& y,
                 at::Tensor grad) {
  at::Tensor logits = at::mm(h, head.t());                      // [m, V]
  const at::Tensor lse = at::logsumexp(logits, 1, true);        // [m, 1]
  const at::Tensor picked = logits.gather(1, y.unsqueeze(1));   // [m, 1]
  const double nll = (lse - picked).sum().item<double>();
  if (grad.defined()) {
    // softmax − onehot, in place on the logits (they are not needed any more).
    logits.sub_(lse).exp_();
    logits.scatter_add_(1, y.unsqueeze(1), at::full({y.size(0), 1}, -1.0f, logits.options()));
    at::mm_out(grad, logits, head);
  }
  return nll;
}

struct ChunkedNll : torch::autograd::Function<ChunkedNll> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden,
                            const at::Tensor& head, const at::Tensor& targets, int64_t chunk) {
    const int64_t M = hidden.size(0);
    const bool want_grad = hidden.requires_grad();
    at::Tensor grad = want_grad ? at::empty({M, hidden.size(1)}, hidden.options()) : at::Tensor();
    const at::Tensor h = hidden.contiguous(), w = head.contiguous();
    double total = 0;
    for (int64_t i = 0; i < M; i += chunk) {
      const int64_t m = std::min(chunk, M - i);
      total += chunk_nll(h.narrow(0, i, m), w, targets.narrow(0, i, m),
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
                           const at::Tensor& targets, int64_t chunk) {
  check_inputs(hidden, head, targets);
  check(chunk >= 1, k_op, "chunk must be >= 1 position, got {}", chunk);
  if (!(hidden.requires_grad() && at::GradMode::is_enabled())) {
    at::NoGradGuard no_grad;
    return ChunkedNll::forward(nullptr, hidden.detach(), head, targets, chunk);
  }
  return ChunkedNll::apply(hidden, head, targets, chunk);
}

}  // namespace oal::train
