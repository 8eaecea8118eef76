#include "oal/attention/kernel_train.h"

#include <torch/csrc/autograd/custom_function.h>

#include "oal/attention/qkv_shape.h"
#include "oal/attention/simd_path.h"
#include "oal/core/blas_threads.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"
#include "oal/simd/kernel_train.h"

namespace oal::attn {
namespace {

constexpr const char* k_op = "kernel_attention_train";

// What the simd kernels read, as contiguous fp32 / int64 tensors that outlive the call.
struct Operands {
  simd::KernelTrainDims dims;
  at::Tensor q, k, v, L, c, group_of, groups;
  double eps = 0;

  simd::KernelTrainParams params() const {
    simd::KernelTrainParams p;
    if (dims.kernel) {
      p.group_of = group_of.data_ptr<int64_t>();
      p.groups = groups.data_ptr<int64_t>();
      p.L = L.data_ptr<float>();
      p.n = L.size(1);
      p.eps = static_cast<float>(eps);
    }
    p.log_scale = c.data_ptr<float>();
    return p;
  }
};

// kernel = false: L, group_of and groups are placeholders (autograd's apply takes no
// undefined tensor). The backward skips the NaN scan: its q, k, v are the forward's.
Operands operands(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const at::Tensor& L, const at::Tensor& c, const at::Tensor& group_of,
                  const at::Tensor& groups, int64_t sinks, int64_t recent, double eps,
                  bool kernel, FiniteScan scan) {
  Operands o;
  const AttentionDims s = check_qkv(k_op, q, k, v, /*allow_longer_keys=*/false, scan);
  o.dims = {s.batch, s.q_heads, s.kv_heads, s.dim, s.value_dim, s.q_len, sinks, recent, kernel};
  o.q = q.detach().contiguous();
  o.k = k.detach().contiguous();
  o.v = v.detach().contiguous();
  o.c = c.detach().to(at::kFloat).contiguous();
  check(o.c.numel() == s.q_heads, k_op, "log_scale: expected [{}], got {}", s.q_heads,
        shape_str(c));
  if (kernel) {
    o.L = L.detach().to(at::kFloat).contiguous();
    o.group_of = group_of.to(at::kLong).contiguous();
    o.groups = groups.to(at::kLong).contiguous();
    check(o.L.dim() == 3 && o.L.size(0) == s.q_heads && o.L.size(1) == o.L.size(2) &&
              o.group_of.sizes() == at::IntArrayRef({s.q_heads, s.dim}) &&
              o.groups.numel() == s.q_heads,
          k_op,
          "kernels for Hq = {}, d = {}: expected L [Hq, n, n] and group_of [Hq, d], got {} and {}",
          s.q_heads, s.dim, shape_str(L), shape_str(group_of));
  }
  o.eps = eps;
  return o;
}

struct KernelTrain : torch::autograd::Function<KernelTrain> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                            const at::Tensor& k, const at::Tensor& v, const at::Tensor& L,
                            const at::Tensor& c, const at::Tensor& group_of,
                            const at::Tensor& groups, int64_t sinks, int64_t recent, double eps,
                            bool kernel) {
    const Operands o =
        operands(q, k, v, L, c, group_of, groups, sinks, recent, eps, kernel, FiniteScan::scan);
    at::Tensor y =
        at::empty({o.dims.batch, o.dims.q_heads, o.dims.len, o.dims.value_dim}, at::kFloat);
    {
      const ScopedSingleThreadBlas one_blas_thread;
      simd::kernel_train_forward_f32(o.dims, o.params(), o.q.data_ptr<float>(),
                                     o.k.data_ptr<float>(), o.v.data_ptr<float>(),
                                     y.data_ptr<float>());
    }
    ctx->save_for_backward({o.q, o.k, o.v, L, c, group_of, groups});
    ctx->saved_data["sinks"] = sinks;
    ctx->saved_data["recent"] = recent;
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["kernel"] = kernel;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const bool kernel = ctx->saved_data["kernel"].toBool();
    const Operands o =
        operands(saved[0], saved[1], saved[2], saved[3], saved[4], saved[5], saved[6],
                 ctx->saved_data["sinks"].toInt(), ctx->saved_data["recent"].toInt(),
                 ctx->saved_data["eps"].toDouble(), kernel,
                 FiniteScan::skip);  // (scanned by the forward)
    const auto& w = o.dims;
    const int64_t n = kernel ? o.L.size(1) : 1;
    const at::Tensor dy = grad[0].to(at::kFloat).contiguous();
    at::Tensor dq = at::empty_like(o.q), dk = at::empty_like(o.k), dv = at::empty_like(o.v);
    at::Tensor dL = at::empty({w.q_heads, n, n}, at::kFloat),
               dc = at::empty({w.q_heads}, at::kFloat);
    {
      const ScopedSingleThreadBlas one_blas_thread;
      simd::kernel_train_backward_f32(
          w, o.params(), o.q.data_ptr<float>(), o.k.data_ptr<float>(), o.v.data_ptr<float>(),
          dy.data_ptr<float>(), dq.data_ptr<float>(), dk.data_ptr<float>(), dv.data_ptr<float>(),
          kernel ? dL.data_ptr<float>() : nullptr, dc.data_ptr<float>());
    }
    return {dq.to(saved[0].scalar_type()),
            dk.to(saved[1].scalar_type()),
            dv.to(saved[2].scalar_type()),
            kernel ? dL.to(saved[3].scalar_type()) : at::Tensor(),
            dc.to(saved[4].scalar_type()),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

bool kernel_train_ready(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const LayerKernels* kernels, const at::Tensor& log_scale) {
  for (const at::Tensor* t : {&q, &k, &v})
    if (!t->defined() || !t->device().is_cpu() || t->scalar_type() != at::kFloat || t->dim() != 4)
      return false;
  if (q.size(2) != k.size(2)) return false;
  if (kernels && kernels->max_groups() > simd::k_kernel_train_max_groups) return false;
  return records_grad(q) || records_grad(k) || records_grad(v) ||
         (kernels && records_grad(kernels->L)) || records_grad(log_scale);
}

at::Tensor kernel_attention_train(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const LayerKernels* kernels, const at::Tensor& log_scale,
                                  const Window& window) {
  for (const at::Tensor* t : {&q, &k, &v})
    check(t->defined() && t->device().is_cpu() && t->scalar_type() == at::kFloat && t->dim() == 4,
          k_op, "expected fp32 CPU q, k, v [B, H, N, D]");
  check(q.size(2) == k.size(2), k_op, "expected queries and keys of one length, got {} and {}",
        q.size(2), k.size(2));
  window.validate(k_op);
  if (!kernels) {  // c_h cancels without a kernel part (its gradient is 0): zeros serve
    const at::Tensor none = at::zeros({1}, at::kFloat);
    return KernelTrain::apply(q, k, v, none, at::zeros({q.size(1)}, at::kFloat), none, none,
                              window.sinks, window.recent, 0.0, false);
  }
  check(log_scale.defined() && log_scale.dim() == 1, k_op, "log_scale: expected [Hq], got {}",
        log_scale.defined() ? shape_str(log_scale) : std::string("none"));
  const at::Tensor groups = at::tensor(kernels->groups, at::kLong);
  return KernelTrain::apply(q, k, v, kernels->L, log_scale, kernels->group_of, groups,
                            window.sinks, window.recent, kernels->eps, true);
}

}  // namespace oal::attn
