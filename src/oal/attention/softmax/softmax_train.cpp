#include "oal/attention/softmax/softmax_train.h"

#include <torch/csrc/autograd/custom_function.h>

#include <limits>

#include "oal/attention/qkv_shape.h"
#include "oal/attention/simd_path.h"
#include "oal/core/blas_threads.h"
#include "oal/core/error.h"
#include "oal/simd/gemm_f32.h"
#include "oal/simd/parallel.h"

namespace oal::attn {
namespace {

constexpr const char* k_op = "softmax_attention_train";

// The inputs as contiguous fp32 rows, with Kᵀ / Vᵀ [B, Hkv, D, N] so that every product
// below reads its right operand row-major (gemm_f32's B).
struct Operands {
  simd::AttentionDims s;
  at::Tensor q, k, v, kt, vt;
  int64_t block = k_train_block;
  float scale = 1.0f;

  // Rows of query head bh (= b·Hq + h) and of its KV head.
  const float* q_rows(int64_t bh) const { return q.data_ptr<float>() + bh * s.q_len * s.dim; }
  int64_t kv_index(int64_t bh) const {
    return (bh / s.q_heads) * s.kv_heads + (bh % s.q_heads) / s.group_size();
  }
  const float* k_rows(int64_t bh) const {
    return k.data_ptr<float>() + kv_index(bh) * s.k_len * s.dim;
  }
  const float* kt_rows(int64_t bh) const {
    return kt.data_ptr<float>() + kv_index(bh) * s.dim * s.k_len;
  }
  const float* v_rows(int64_t bh) const {
    return v.data_ptr<float>() + kv_index(bh) * s.k_len * s.value_dim;
  }
  const float* vt_rows(int64_t bh) const {
    return vt.data_ptr<float>() + kv_index(bh) * s.value_dim * s.k_len;
  }
};

Operands operands(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                  int64_t block) {
  Operands o;
  o.s = check_qkv(k_op, q, k, v, /*allow_longer_keys=*/false);
  o.q = q.detach().contiguous();
  o.k = k.detach().contiguous();
  o.v = v.detach().contiguous();
  o.kt = o.k.transpose(-1, -2).contiguous();
  o.vt = o.v.transpose(-1, -2).contiguous();
  o.block = block;
  o.scale = static_cast<float>(scale);
  return o;
}

// Scaled scores of query rows [qs, qs + tq) of head bh against keys [0, qs + tq), the
// keys after each row's own position at -inf.  [tq, qs + tq] fp32.
at::Tensor block_scores(const Operands& o, int64_t bh, int64_t qs, int64_t tq) {
  const int64_t ke = qs + tq, N = o.s.k_len, D = o.s.dim;
  at::Tensor S = at::empty({tq, ke}, at::kFloat);
  float* p = S.data_ptr<float>();
  simd::gemm_f32(tq, ke, D, o.q_rows(bh) + qs * D, D, 1, o.kt_rows(bh), N, p, ke, false);
  S.mul_(o.scale);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = qs + i + 1; j < ke; ++j) p[i * ke + j] = neg_inf;
  return S;
}

int64_t num_blocks(const Operands& o) { return (o.s.q_len + o.block - 1) / o.block; }

// y [B, Hq, N, Dv] and lse [B, Hq, N].
std::pair<at::Tensor, at::Tensor> forward_pass(const Operands& o) {
  const auto& s = o.s;
  const int64_t heads = s.batch * s.q_heads, nb = num_blocks(o);
  at::Tensor y = at::empty({s.batch, s.q_heads, s.q_len, s.value_dim}, at::kFloat);
  at::Tensor lse = at::empty({s.batch, s.q_heads, s.q_len}, at::kFloat);
  const ScopedSingleThreadBlas one_blas_thread;
  // Items from the last query block (the most keys) down, so the tail balances.
  simd::parallel_items(heads * nb, 0, [&](int64_t, int64_t item) {
    const int64_t bh = item % heads, qs = (nb - 1 - item / heads) * o.block;
    const int64_t tq = std::min(o.block, s.q_len - qs), ke = qs + tq;
    at::Tensor S = block_scores(o, bh, qs, tq);
    const at::Tensor m = at::logsumexp(S, 1, true);  // [tq, 1]
    S.sub_(m).exp_();                                 // P
    simd::gemm_f32(tq, s.value_dim, ke, S.data_ptr<float>(), ke, 1, o.v_rows(bh), s.value_dim,
                   y.data_ptr<float>() + (bh * s.q_len + qs) * s.value_dim, s.value_dim, false);
    std::copy_n(m.data_ptr<float>(), tq, lse.data_ptr<float>() + bh * s.q_len + qs);
  });
  return {y, lse};
}

// dq, dk, dv for the output gradient dy (flash attention's backward, per query head).
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_pass(const Operands& o, const at::Tensor& y,
                                                             const at::Tensor& lse,
                                                             const at::Tensor& dy_in) {
  const auto& s = o.s;
  const int64_t heads = s.batch * s.q_heads, nb = num_blocks(o);
  const int64_t N = s.q_len, D = s.dim, Dv = s.value_dim;
  const at::Tensor dy = dy_in.to(at::kFloat).contiguous();
  // Dᵢ = Σ_c dyᵢc yᵢc: the softmax gradient's row term.  [B, Hq, N]
  const at::Tensor drow = (dy * y).sum(-1).contiguous();
  at::Tensor dq = at::empty({s.batch, s.q_heads, N, D}, at::kFloat);
  // Per query head; summed over each KV head's group below.
  at::Tensor dk = at::zeros({s.batch, s.q_heads, N, D}, at::kFloat);
  at::Tensor dv = at::zeros({s.batch, s.q_heads, N, Dv}, at::kFloat);
  const ScopedSingleThreadBlas one_blas_thread;
  simd::parallel_items(heads, 0, [&](int64_t, int64_t bh) {
    const float* qh = o.q_rows(bh);
    const float* dyh = dy.data_ptr<float>() + bh * N * Dv;
    float* dkh = dk.data_ptr<float>() + bh * N * D;
    float* dvh = dv.data_ptr<float>() + bh * N * Dv;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t qs = b * o.block, tq = std::min(o.block, N - qs), ke = qs + tq;
      at::Tensor P = block_scores(o, bh, qs, tq);
      P.sub_(lse[bh / s.q_heads][bh % s.q_heads].narrow(0, qs, tq).unsqueeze(1)).exp_();
      // dV[:ke] += Pᵀ dY
      simd::gemm_f32(ke, Dv, tq, P.data_ptr<float>(), 1, ke, dyh + qs * Dv, Dv, dvh, Dv, true);
      // dP = dY Vᵀ, then dS = P ∘ (dP − D) · scale, in place in dP.
      at::Tensor dS = at::empty({tq, ke}, at::kFloat);
      simd::gemm_f32(tq, ke, Dv, dyh + qs * Dv, Dv, 1, o.vt_rows(bh), N, dS.data_ptr<float>(),
                     ke, false);
      dS.sub_(drow[bh / s.q_heads][bh % s.q_heads].narrow(0, qs, tq).unsqueeze(1))
          .mul_(P)
          .mul_(o.scale);
      // dQ = dS K,  dK[:ke] += dSᵀ Q
      simd::gemm_f32(tq, D, ke, dS.data_ptr<float>(), ke, 1, o.k_rows(bh), D,
                     dq.data_ptr<float>() + (bh * N + qs) * D, D, false);
      simd::gemm_f32(ke, D, tq, dS.data_ptr<float>(), 1, ke, qh + qs * D, D, dkh, D, true);
    }
  });
  const int64_t g = s.group_size();
  return {dq, dk.view({s.batch, s.kv_heads, g, N, D}).sum(2),
          dv.view({s.batch, s.kv_heads, g, N, Dv}).sum(2)};
}

struct SoftmaxTrain : torch::autograd::Function<SoftmaxTrain> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                            const at::Tensor& k, const at::Tensor& v, double scale, int64_t block) {
    const Operands o = operands(q, k, v, scale, block);
    auto [y, lse] = forward_pass(o);
    ctx->save_for_backward({o.q, o.k, o.v, y, lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["block"] = block;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const double scale = ctx->saved_data["scale"].toDouble();
    const int64_t block = ctx->saved_data["block"].toInt();
    const Operands o = operands(saved[0], saved[1], saved[2], scale, block);
    auto [dq, dk, dv] = backward_pass(o, saved[3], saved[4], grad[0]);
    return {dq, dk, dv, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool softmax_train_ready(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  for (const at::Tensor* t : {&q, &k, &v})
    if (!t->defined() || !t->device().is_cpu() || t->scalar_type() != at::kFloat || t->dim() != 4)
      return false;
  return q.size(2) == k.size(2) && (records_grad(q) || records_grad(k) || records_grad(v));
}

at::Tensor softmax_attention_train(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   double scale, int64_t block) {
  for (const at::Tensor* t : {&q, &k, &v})
    check(t->defined() && t->device().is_cpu() && t->scalar_type() == at::kFloat, k_op,
          "expected fp32 CPU q, k, v");
  check(block >= 1, k_op, "block must be >= 1, got {}", block);
  check(std::isfinite(scale) && scale > 0, k_op, "scale must be finite and > 0, got {}", scale);
  return SoftmaxTrain::apply(q, k, v, scale, block);
}

}  // namespace oal::attn
