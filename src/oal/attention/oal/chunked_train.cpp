#include "oal/attention/oal/chunked_train.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "oal/attention/oal/feature_map.h"
#include "oal/attention/qkv_shape.h"
#include "oal/core/error.h"
#include "oal/simd/oal_prefill.h"

namespace oal::attn::hd_detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor leaf(const at::Tensor& t) { return t.detach().requires_grad_(true); }

// The kernels with L replaced.
LayerKernels with_L(const at::Tensor& group_of, const at::Tensor& groups, const at::Tensor& L,
                    double eps) {
  const at::Tensor g = groups.contiguous();
  return {group_of, L,
          std::vector<int64_t>(g.data_ptr<int64_t>(), g.data_ptr<int64_t>() + g.numel()), eps};
}

// The degree-2 feature columns, row by row on the CPU (what phiQ/phiK and their
// gradients spend most of their time on when written as ATen ops over [rows, d, d]).
// Rows are [blocks, per_block] with one coefficient row coef[block % heads] per block
// (the query head of a [B, Hq, tc] layout), or no coefficients (coef == nullptr).
struct PairRows {
  int64_t blocks, per_block, heads, d;
};

// out[row, p] = coef[p] x_r x_t over the packed pairs p = (r <= t) of x [rows, d];
// out: a [rows, >= P] view whose rows are strided (a slice of the features).
template <typename T>
void pair_products(const PairRows& s, const T* x, const T* coef, T* out, int64_t out_stride) {
  at::parallel_for(0, s.blocks * s.per_block, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const T* xr = x + row * s.d;
      const T* c = coef ? coef + ((row / s.per_block) % s.heads) * (s.d * (s.d + 1) / 2) : nullptr;
      T* o = out + row * out_stride;
      for (int64_t r = 0, p = 0; r < s.d; ++r)
        for (int64_t t = r; t < s.d; ++t, ++p) o[p] = (c ? c[p] : T(1)) * xr[r] * xr[t];
    }
  });
}

// The backward of pair_products for the gradient w [rows, >= P] (strided rows):
// dx[row] += (W + Wᵀ) x_row with W_rt = coef_rt w_rt (r <= t), and, when dcoef is
// given, dcoef[head] += sum over the head's rows of w_rt x_r x_t ([heads, P]).
template <typename T>
void pair_products_backward(const PairRows& s, const T* x, const T* coef, const T* w,
                            int64_t w_stride, T* dx, T* dcoef) {
  const int64_t P = s.d * (s.d + 1) / 2;
  std::vector<T> partial(dcoef ? static_cast<size_t>(s.blocks * P) : 0, T(0));
  at::parallel_for(0, s.blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) {
      const T* c = coef ? coef + (blk % s.heads) * P : nullptr;
      T* dc = dcoef ? partial.data() + blk * P : nullptr;
      for (int64_t row = blk * s.per_block; row < (blk + 1) * s.per_block; ++row) {
        const T* xr = x + row * s.d;
        const T* wr = w + row * w_stride;
        T* g = dx + row * s.d;
        for (int64_t r = 0, p = 0; r < s.d; ++r) {
          T acc = 0;
          const T xrr = xr[r];
          for (int64_t t = r; t < s.d; ++t, ++p) {
            const T wc = c ? c[p] * wr[p] : wr[p];
            acc += wc * xr[t];  // d/dx_r of wc x_r x_t
            g[t] += wc * xrr;   // d/dx_t (on the diagonal both terms: 2 wc x_r)
            if (dc) dc[p] += wr[p] * xrr * xr[t];
          }
          g[r] += acc;
        }
      }
    }
  });
  if (!dcoef) return;
  for (int64_t blk = 0; blk < s.blocks; ++blk)
    for (int64_t p = 0; p < P; ++p) dcoef[(blk % s.heads) * P + p] += partial[blk * P + p];
}

// phiQ(x) with p's coefficients, or phiK(x) without (p == nullptr), as phi_q / phi_k
// (feature_map.h) compute them: x [B, H, tc, d] -> [B, H, tc, Df], contiguous.
at::Tensor features(const at::Tensor& x_in, const Prepared* p) {
  const at::Tensor x = x_in.contiguous();
  const int64_t B = x.size(0), H = x.size(1), tc = x.size(2), d = x.size(3);
  const int64_t Df = 1 + d + d * (d + 1) / 2;
  at::Tensor f = at::empty({B, H, tc, Df}, x.options());
  if (p) {
    f.select(-1, 0).copy_(p->phi_a.view({1, H, 1}).expand({B, H, tc}));
    f.narrow(-1, 1, d).copy_(x * p->phi_b.view({1, H, 1, d}));
  } else {
    f.select(-1, 0).fill_(1);
    f.narrow(-1, 1, d).copy_(x);
  }
  const at::Tensor c = p ? p->phi_c.contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "chunked_train_features", [&] {
    pair_products<scalar_t>({B * H, tc, H, d}, x.data_ptr<scalar_t>(),
                            p ? c.data_ptr<scalar_t>() : nullptr, f.data_ptr<scalar_t>() + 1 + d,
                            Df);
  });
  return f;
}

// The gradient of x through the degree-2 columns of features(x) for their gradient w
// [B, H, tc, Df] (contiguous), with the coefficients' gradient added to dcoef [H, P]
// (phiQ) or without coefficients (phiK: coef and dcoef undefined). -> [B, H, tc, d].
at::Tensor pair_grad(const at::Tensor& x_in, const at::Tensor& coef, const at::Tensor& w,
                     const at::Tensor& dcoef) {
  const at::Tensor x = x_in.contiguous();
  const int64_t B = x.size(0), H = x.size(1), tc = x.size(2), d = x.size(3);
  check(w.is_contiguous() && (!dcoef.defined() || dcoef.is_contiguous()), "hd_chunked",
        "pair_grad: expected contiguous feature gradients and coefficient gradients");
  at::Tensor dx = at::zeros_like(x);
  const at::Tensor c = coef.defined() ? coef.contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "chunked_train_pair_grad", [&] {
    pair_products_backward<scalar_t>(
        {B * H, tc, H, d}, x.data_ptr<scalar_t>(), c.defined() ? c.data_ptr<scalar_t>() : nullptr,
        w.data_ptr<scalar_t>() + 1 + d, w.size(-1), dx.data_ptr<scalar_t>(),
        dcoef.defined() ? dcoef.data_ptr<scalar_t>() : nullptr);
  });
  return dx;
}

// Gradients of the prepared quantities (prepare()), summed over chunks; L's gradient is
// taken through prepare once at the end.
struct PreparedGrads {
  at::Tensor a, b, c, z_weight, z_const;
  explicit PreparedGrads(const Prepared& p)
      : a(at::zeros_like(p.phi_a)), b(at::zeros_like(p.phi_b)), c(at::zeros_like(p.phi_c)),
        z_weight(at::zeros_like(p.z_weight)), z_const(at::zeros_like(p.z_const)) {}
};

// Everything the backward reads, shaped once.
struct Backward {
  at::Tensor q, k, v, u, dU;  // dU [B, Hkv, G, T, Dv+1]
  Prepared p;                 // detached
  double eps = 0;
  int64_t B = 0, Hq = 0, Hkv = 0, G = 0, d = 0, Dv = 0;
  at::Tensor dq, dk, dv;
  PreparedGrads* dp = nullptr;

  at::Tensor dU_rows(int64_t cs, int64_t tc) const {  // [B, Hkv, G·tc, Dv+1]
    return dU.narrow(3, cs, tc).reshape({B, Hkv, G * tc, Dv + 1});
  }

  // The chunk's reads phiQ(q)·S of the state before it: q and phiQ's coefficients.
  void reads(int64_t cs, int64_t tc, const at::Tensor& S) {
    const at::Tensor qb = q.narrow(2, cs, tc);
    const at::Tensor dphi =
        at::matmul(dU_rows(cs, tc), S.transpose(-1, -2)).view({B, Hq, tc, -1});
    const at::Tensor d1 = dphi.narrow(-1, 1, d);
    dp->a.add_(dphi.select(-1, 0).sum(at::IntArrayRef{0, 2}));
    dp->b.add_((d1 * qb).sum(at::IntArrayRef{0, 2}));
    dq.narrow(2, cs, tc)
        .add_(d1 * p.phi_b.view({1, Hq, 1, d}) + pair_grad(qb, p.phi_c, dphi, dp->c));
  }

  // The chunk's writes phiK(k)ᵀ u into the state, whose gradient after the chunk is R.
  void writes(int64_t cs, int64_t tc, const at::Tensor& R) {
    const at::Tensor kb = k.narrow(2, cs, tc), ub = u.narrow(2, cs, tc);
    const at::Tensor dphi = at::matmul(ub, R.transpose(-1, -2));  // [B, Hkv, tc, Df]
    const at::Tensor du = at::matmul(features(kb, nullptr), R);   // [B, Hkv, tc, Dv+1]
    dk.narrow(2, cs, tc).add_(dphi.narrow(-1, 1, d) + pair_grad(kb, {}, dphi, {}));
    dv.narrow(2, cs, tc).add_(du.narrow(-1, 0, Dv));
  }

  // The chunk's sums among its own tokens (small: autograd of the factored form).
  void own(int64_t cs, int64_t tc) {
    const at::AutoGradMode on(true);
    const at::Tensor ql = leaf(q.narrow(2, cs, tc)), kl = leaf(k.narrow(2, cs, tc)),
                     vl = leaf(v.narrow(2, cs, tc));
    Prepared pl = p;
    pl.z_weight = leaf(p.z_weight);
    pl.z_const = leaf(p.z_const);
    const at::Tensor sums = intra_chunk_sums(ql, kl, with_ones(vl), pl, eps);
    const auto g = torch::autograd::grad({sums}, {ql, kl, vl, pl.z_weight, pl.z_const},
                                         {dU.narrow(3, cs, tc)}, false, false,
                                         /*allow_unused=*/true);
    const std::vector<at::Tensor> into{dq.narrow(2, cs, tc), dk.narrow(2, cs, tc),
                                       dv.narrow(2, cs, tc), dp->z_weight, dp->z_const};
    for (size_t i = 0; i < into.size(); ++i)
      if (g[i].defined()) into[i].add_(g[i]);
  }

  // R += phiQ(q)ᵀ dũ of the chunk (summed over its query heads).
  void collect(int64_t cs, int64_t tc, at::Tensor& R) const {
    const at::Tensor fq = features(q.narrow(2, cs, tc), &p).view({B, Hkv, G * tc, -1});
    R.add_(at::matmul(fq.transpose(-1, -2), dU_rows(cs, tc)));
  }
};

// The forward's sums: the fp32 CPU prefill kernel when a plan is given, else ATen.
at::Tensor forward_sums(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const LayerKernels& lk, at::Tensor& S, bool state_empty, int64_t chunk,
                        const simd::OalPlan* plan) {
  if (plan == nullptr)
    return chunked_sums(q, k, with_ones(v), prepare(lk, q.scalar_type(), q.device()), lk.eps, S,
                        state_empty, chunk);
  const AttentionDims s = check_qkv("hd_chunked", q, k, v, false, FiniteScan::skip);
  const at::Tensor qf = q.contiguous(), kf = k.contiguous(), vf = v.contiguous();
  at::Tensor num = at::empty({s.batch, s.q_heads, s.q_len, s.value_dim}, q.options());
  at::Tensor den = at::empty({s.batch, s.q_heads, s.q_len, 1}, q.options());
  at::Tensor den_rows = den.view({s.batch, s.q_heads, s.q_len});
  simd::OalPrefillOptions o;
  o.chunk = std::min(chunk, s.q_len);
  o.denominators = den_rows.data_ptr<float>();
  S = S.contiguous();
  simd::oal_prefill_f32(s, *plan, qf.data_ptr<float>(), kf.data_ptr<float>(),
                        vf.data_ptr<float>(), num.data_ptr<float>(), S.data_ptr<float>(), o);
  return at::cat({num, den}, -1).view(
      {s.batch, s.kv_heads, s.group_size(), s.q_len, s.value_dim + 1});
}

struct ChunkedTrain : torch::autograd::Function<ChunkedTrain> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, const at::Tensor& L, const at::Tensor& S0,
                               const at::Tensor& group_of, const at::Tensor& groups, double eps,
                               bool state_empty, int64_t chunk, const simd::OalPlan* plan) {
    at::Tensor S = S0.detach().clone();
    const at::Tensor ut =
        forward_sums(q, k, v, with_L(group_of, groups, L, eps), S, state_empty, chunk, plan);
    ctx->save_for_backward({q, k, v, L, S0, group_of, groups});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["state_empty"] = state_empty;
    ctx->saved_data["chunk"] = chunk;
    return {ut, S};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& q = saved[0];
    const at::Tensor& S0 = saved[4];
    const double eps = ctx->saved_data["eps"].toDouble();
    const bool state_empty = ctx->saved_data["state_empty"].toBool();
    const int64_t chunk = ctx->saved_data["chunk"].toInt(), T = q.size(2);
    Backward b;
    b.q = q;
    b.k = saved[1];
    b.v = saved[2];
    b.u = with_ones(b.v);
    b.eps = eps;
    b.B = q.size(0);
    b.Hq = q.size(1);
    b.Hkv = b.k.size(1);
    b.G = b.Hq / b.Hkv;
    b.d = q.size(3);
    b.Dv = b.v.size(3);
    b.dU = grad[0].defined() ? grad[0].to(q.scalar_type())
                             : at::zeros({b.B, b.Hkv, b.G, T, b.Dv + 1}, q.options());
    // prepare() once with a graph to L: the chunks' gradients of its outputs are summed
    // and taken through it at the end.
    const at::Tensor Ll = leaf(saved[3]);
    Prepared pl;
    {
      const at::AutoGradMode on(true);
      pl = prepare(with_L(saved[5], saved[6], Ll, eps), q.scalar_type(), q.device());
    }
    b.p = {pl.z_weight.detach(), pl.z_const.detach(), pl.phi_a.detach(), pl.phi_b.detach(),
           pl.phi_c.detach()};
    PreparedGrads dp(b.p);
    b.dp = &dp;
    b.dq = at::zeros_like(q);
    b.dk = at::zeros_like(b.k);
    b.dv = at::zeros_like(b.v);

    // Forward order: each chunk's reads of the state before it, the state rebuilt.
    at::Tensor S = S0.detach().clone();
    for (int64_t cs = 0; cs < T; cs += chunk) {
      const int64_t tc = std::min(chunk, T - cs);
      if (cs > 0 || !state_empty) b.reads(cs, tc, S);
      S.add_(at::matmul(features(b.k.narrow(2, cs, tc), nullptr).transpose(-1, -2),
                        b.u.narrow(2, cs, tc)));
    }
    // Reverse order: own sums and writes, R = d loss / d (state after the chunk).
    at::Tensor R = grad[1].defined() ? grad[1].to(q.scalar_type()).clone() : at::zeros_like(S0);
    for (int64_t cs = ((T - 1) / chunk) * chunk; cs >= 0; cs -= chunk) {
      const int64_t tc = std::min(chunk, T - cs);
      b.own(cs, tc);
      b.writes(cs, tc, R);
      if (cs > 0 || !state_empty) b.collect(cs, tc, R);
    }
    const auto dL = torch::autograd::grad(
        {pl.phi_a, pl.phi_b, pl.phi_c, pl.z_weight, pl.z_const}, {Ll},
        {dp.a, dp.b, dp.c, dp.z_weight, dp.z_const}, false, false, /*allow_unused=*/true);
    return {b.dq, b.dk, b.dv, dL[0], R, at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

TrainSums chunked_sums_train(const at::Tensor& qc, const at::Tensor& kc, const at::Tensor& vc,
                             const LayerKernels& lk, const at::Tensor& S0, bool state_empty,
                             int64_t chunk, const simd::OalPlan* plan) {
  check(qc.device().is_cpu(), "hd_chunked",
        "the chunked training form runs on the CPU; got q on {}", qc.device().str());
  const at::Tensor groups = at::tensor(lk.groups, at::kLong);
  const variable_list out = ChunkedTrain::apply(qc, kc, vc, lk.L, S0, lk.group_of, groups,
                                                lk.eps, state_empty, chunk, plan);
  return {out[0], out[1]};
}

}  // namespace oal::attn::hd_detail
