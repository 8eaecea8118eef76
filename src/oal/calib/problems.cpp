#include "oal/calib/problems.h"

#include <cmath>

#include "oal/attention/baselines/feature_linear.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/attention/windowed/windowed_reference.h"
#include "oal/core/error.h"

namespace oal::calib {
namespace {

at::Tensor leaf(const at::Tensor& t) {
  at::Tensor x = t.detach().to(at::kFloat).clone();
  x.set_requires_grad(true);
  return x;
}

// Normalised causal attention from kernel rows: w [B, H, P, T] at `positions`,
// v [B, 1, T, Dv] -> [B, H, P, Dv].
at::Tensor normalise_rows(const at::Tensor& w, const at::Tensor& v,
                          const std::vector<int64_t>& positions) {
  const int64_t T = w.size(-1);
  at::Tensor pos = at::tensor(positions, at::kLong).unsqueeze(1);
  at::Tensor mask = (at::arange(T, at::kLong).unsqueeze(0) <= pos).to(w.scalar_type());
  at::Tensor wm = w * mask;
  at::Tensor den = wm.sum(-1, true);
  check((den > 0).all().item<bool>(), "fit", "a kernel denominator is not positive");
  return at::matmul(wm, v.to(w.scalar_type())) / den;
}

// [D, G] fp32: 1 where dimension r belongs to group g (what quadratic_weights sums by).
at::Tensor group_onehot(const std::vector<std::vector<int64_t>>& groups, int64_t D) {
  at::Tensor onehot = at::zeros({D, int64_t(groups.size())}, at::kFloat);
  for (size_t g = 0; g < groups.size(); ++g)
    for (int64_t r : groups[g]) onehot[r][int64_t(g)] = 1.0f;
  return onehot;
}

// The method's parameters; with a window also c_h [Hq] (from `log_scale0`), fitted
// jointly on the windowed output (its log-weights over the sampled rows, as the
// quadratic kernel's windowed problem).
FitProblem feature_problem(std::shared_ptr<attn::FeatureMapMethod> m, const attn::Window& w,
                           double log_scale0) {
  FitProblem p;
  p.params = m->parameters();
  if (w.none()) {
    p.outputs_at = [m](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const std::vector<int64_t>& pos) { return m->forward_at(q, k, v, pos); };
    p.outputs = [m](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      return m->forward(q, k, v);
    };
    return p;
  }
  at::Tensor c = leaf(at::full({m->q_heads()}, log_scale0, at::kDouble));
  p.params.push_back(c);
  p.outputs_at = [m, c, w](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const std::vector<int64_t>& pos) {
    const at::Tensor log_kappa = attn::windowed_log_kappa(*m, q, k, pos);
    const auto dt = log_kappa.scalar_type();
    const at::Tensor rows = q.index_select(2, at::tensor(pos, at::kLong)).to(dt);
    const at::Tensor keys = attn::expand_kv_heads(k.to(dt), q.size(1));
    const at::Tensor scores = at::matmul(rows, keys.transpose(-1, -2)) / std::sqrt(double(q.size(3)));
    return attn::log_kernel_attention(
        attn::windowed_log_weights(scores, log_kappa, c.to(dt), w, pos), v, pos);
  };
  // Every position: the linear-time windowed layer over the same method and c_h.
  auto layer = std::make_shared<attn::WindowedAttention>(m, w, c);
  p.outputs = [layer](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    at::NoGradGuard g;
    return layer->forward(q, k, v);
  };
  return p;
}

}  // namespace

at::Tensor quadratic_weights(const at::Tensor& q_rows, const at::Tensor& k,
                             const at::Tensor& group_onehot, const at::Tensor& L, double eps) {
  const auto dt = q_rows.scalar_type();
  const double inv = 1.0 / std::sqrt(double(q_rows.size(-1)));
  // x_r = q_r k_r / sqrt(D) for every (row, key) pair, summed per group.
  at::Tensor x = q_rows.unsqueeze(-2) * k.unsqueeze(-3) * inv;        // [B, 1, P, T, D]
  at::Tensor s = at::matmul(x, group_onehot.to(dt));                  // [B, 1, P, T, G]
  at::Tensor sbar = at::cat({at::ones_like(s.narrow(-1, 0, 1)), s}, -1);
  at::Tensor z = at::matmul(sbar, at::tril(L).to(dt));                // (Lᵀ s̄)ᵀ
  return eps + z.pow(2).sum(-1);
}

attn::QuadraticKernel QuadraticProblem::kernel_from(const std::vector<at::Tensor>& values) const {
  return attn::QuadraticKernel::from_lower(groups, at::tril(values.at(0).to(at::kDouble)), eps);
}

QuadraticProblem quadratic_problem(const attn::QuadraticKernel& init) {
  QuadraticProblem qp;
  qp.groups = init.groups();
  qp.eps = init.eps();
  const int64_t D = init.dim();
  const at::Tensor onehot = group_onehot(qp.groups, D);
  at::Tensor L = leaf(init.lower());
  const double eps = qp.eps;
  auto groups = qp.groups;
  qp.problem.params = {L};
  qp.problem.outputs_at = [=](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const std::vector<int64_t>& pos) {
    at::Tensor rows = q.index_select(2, at::tensor(pos, at::kLong));
    return normalise_rows(quadratic_weights(rows, k, onehot, L, eps), v, pos);
  };
  qp.problem.outputs = [=](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    at::NoGradGuard g;
    const int64_t T = q.size(2);
    if (T * T * q.size(3) <= (int64_t(1) << 24)) {
      // Small enough for the factored pairwise form (exactly >= eps, no cancellation);
      // one sequence at a time keeps the [T, T, D] intermediate bounded.
      std::vector<int64_t> all(T);
      for (int64_t i = 0; i < T; ++i) all[i] = i;
      std::vector<at::Tensor> ys;
      for (int64_t b = 0; b < q.size(0); ++b) {
        auto sl = [b](const at::Tensor& t) { return t.narrow(0, b, 1); };
        ys.push_back(normalise_rows(quadratic_weights(sl(q), sl(k), onehot, L, eps), sl(v), all));
      }
      return at::cat(ys, 0);
    }
    auto kernel =
        attn::QuadraticKernel::from_lower(groups, at::tril(L.detach().to(at::kDouble)), eps);
    attn::QuadraticAttention m = attn::QuadraticAttention::from_kernels({kernel}, {}, false);
    return m.forward(q, k, v);
  };
  return qp;
}

QuadraticProblem windowed_quadratic_problem(const attn::QuadraticKernel& init, double log_scale0,
                                            const attn::Window& window) {
  QuadraticProblem qp = quadratic_problem(init);
  at::Tensor L = qp.problem.params.at(0);
  at::Tensor c = leaf(at::full({1}, log_scale0, at::kDouble));
  qp.problem.params.push_back(c);
  const int64_t D = init.dim();
  const at::Tensor onehot = group_onehot(qp.groups, D);
  const double eps = qp.eps;
  auto groups = qp.groups;
  // Rows at `pos` against every key: log-weights of the windowed formula, normalised.
  auto rows_out = [=](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const std::vector<int64_t>& pos) {
    at::Tensor rows = q.index_select(2, at::tensor(pos, at::kLong));
    at::Tensor scores = at::matmul(rows, k.transpose(-1, -2)) / std::sqrt(double(D));
    at::Tensor log_kappa = quadratic_weights(rows, k, onehot, L, eps).log();
    return attn::log_kernel_attention(
        attn::windowed_log_weights(scores, log_kappa, c, window, pos), v, pos);
  };
  qp.problem.outputs_at = rows_out;
  qp.problem.outputs = [=](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    at::NoGradGuard g;
    const int64_t T = q.size(2);
    if (T * T * D > (int64_t(1) << 26)) {  // long blocks: the linear-time method
      auto kernel =
          attn::QuadraticKernel::from_lower(groups, at::tril(L.detach().to(at::kDouble)), eps);
      auto base = std::make_shared<attn::QuadraticAttention>(
          attn::QuadraticAttention::from_kernels({kernel}));
      return attn::WindowedAttention(base, window, c.detach()).forward(q, k, v);
    }
    // Rows in blocks of 128 bound the [rows, T, D] intermediate of the factored weights.
    std::vector<at::Tensor> ys;
    for (int64_t b = 0; b < q.size(0); ++b) {
      auto sl = [b](const at::Tensor& t) { return t.narrow(0, b, 1); };
      std::vector<at::Tensor> parts;
      for (int64_t r0 = 0; r0 < T; r0 += 128) {
        std::vector<int64_t> pos;
        for (int64_t i = r0; i < std::min(T, r0 + 128); ++i) pos.push_back(i);
        parts.push_back(rows_out(sl(q), sl(k), sl(v), pos));
      }
      ys.push_back(at::cat(parts, 2));
    }
    return at::cat(ys, 0);
  };
  return qp;
}

FitProblem taylorshift_problem(double tau0, int64_t head_dim, const attn::Window& w,
                               double log_scale0) {
  auto m = std::make_shared<attn::TaylorShiftAttention>(leaf(at::full({1}, tau0)), 1, head_dim);
  return feature_problem(m, w, log_scale0);
}

FitProblem dijiang_problem(const at::Tensor& projection, const at::Tensor& theta0,
                           const attn::Window& w, double log_scale0) {
  auto m = std::make_shared<attn::DiJiangAttention>(projection, leaf(theta0.reshape({1, -1})), 1);
  return feature_problem(m, w, log_scale0);
}

FitProblem spectraformer_problem(const attn::SpectraFormerAttention& init, const attn::Window& w,
                                 double log_scale0) {
  auto sd = init.state_dict();
  auto m = std::make_shared<attn::SpectraFormerAttention>(
      leaf(sd.at("B")), leaf(sd.at("G")), leaf(sd.at("S")), sd.at("perm"), init.q_heads(),
      init.kv_heads());
  return feature_problem(m, w, log_scale0);
}

FitProblem fixed_feature_problem(std::shared_ptr<attn::FeatureMapMethod> m, const attn::Window& w,
                                 double log_scale0) {
  check(!w.none(), "calibrate", "a fixed feature map has nothing to fit without a window");
  return feature_problem(std::move(m), w, log_scale0);
}

}  // namespace oal::calib
