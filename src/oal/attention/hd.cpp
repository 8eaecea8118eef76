#include "oal/attention/hd.h"

#include <c10/core/GradMode.h>

#include <cmath>
#include <vector>

#include "oal/attention/kernel_blocker.h"
#include "oal/attention/qkv_shape.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"
#include "oal/kernels/cpu/oal_prefill.h"

namespace oal::attn {
namespace {

// Flat index r * d + t of the pairs r <= t in the packed H2 order (triu_indices order).
at::Tensor packed_pair_index(int64_t d, const at::Device& dev) {
  auto tri = at::triu_indices(d, d, 0, at::TensorOptions().dtype(at::kLong).device(dev));
  return tri[0] * d + tri[1];
}

// Multiplicity m_rt of each packed pair: 1 on the diagonal, 2 off it.
at::Tensor packed_pair_multiplicity(int64_t d, at::ScalarType ct, const at::Device& dev) {
  auto tri = at::triu_indices(d, d, 0, at::TensorOptions().dtype(at::kLong).device(dev));
  return 2.0 - (tri[0] == tri[1]).to(ct);
}

// Kernel quantities one evaluation needs, in the compute dtype (differentiable in L).
struct Prepared {
  at::Tensor z_weight;  // [Hq, n, d]: L[h, g(r)+1, c] at [h, c, r] (factored form)
  at::Tensor z_const;   // [Hq, n]: L[h, 0, c]
  at::Tensor phi_a;     // [Hq]: a
  at::Tensor phi_b;     // [Hq, d]: b_r / sqrt(d)
  at::Tensor phi_c;     // [Hq, P]: m_rt C_rt / d at the packed pairs
};

Prepared prepare(const LayerKernels& lk, at::ScalarType ct, const at::Device& dev) {
  int64_t hq = lk.heads(), d = lk.dim(), n = lk.max_groups() + 1;
  auto L = at::tril(lk.L.to(dev, ct));
  auto gidx = lk.group_of.to(dev) + 1;  // [Hq, d] matrix index of each dimension's group
  auto rows = L.gather(1, gidx.unsqueeze(-1).expand({hq, d, n}));  // [Hq, d, n]
  Prepared p;
  p.z_weight = rows.transpose(1, 2);
  p.z_const = L.select(1, 0);
  auto M = at::matmul(L, L.transpose(1, 2));
  p.phi_a = M.select(1, 0).select(1, 0) + lk.eps;
  p.phi_b = 2.0 * M.select(1, 0).gather(1, gidx) / std::sqrt(static_cast<double>(d));
  auto Mrows = M.gather(1, gidx.unsqueeze(-1).expand({hq, d, n}));  // [Hq, d, n]
  auto C = Mrows.gather(2, gidx.unsqueeze(1).expand({hq, d, d}));   // [Hq, d, d]
  p.phi_c = C.reshape({hq, d * d}).index_select(1, packed_pair_index(d, dev)) *
            packed_pair_multiplicity(d, ct, dev) / static_cast<double>(d);
  return p;
}

// phiK(k): [B, H, T, d] -> [B, H, T, Df] = [1, k_r, k_r k_t (r <= t)].
at::Tensor phi_k(const at::Tensor& k) {
  int64_t d = k.size(-1);
  auto outer = (k.unsqueeze(-1) * k.unsqueeze(-2)).flatten(-2);
  auto packed = outer.index_select(-1, packed_pair_index(d, k.device()));
  return at::cat({at::ones_like(k.narrow(-1, 0, 1)), k, packed}, -1);
}

// phiQ(q) per query head: [B, Hq, T, d] -> [B, Hq, T, Df].
at::Tensor phi_q(const at::Tensor& q, const Prepared& p) {
  int64_t hq = q.size(1), d = q.size(-1);
  auto outer = (q.unsqueeze(-1) * q.unsqueeze(-2)).flatten(-2);
  auto packed = outer.index_select(-1, packed_pair_index(d, q.device()));
  auto a = p.phi_a.view({1, hq, 1, 1}).expand({q.size(0), hq, q.size(2), 1});
  return at::cat({a, q * p.phi_b.view({1, hq, 1, d}),
                  packed * p.phi_c.view({1, hq, 1, packed.size(-1)})},
                 -1);
}

// Throws unless every readout denominator is finite and > 0.
void check_denominator(std::string_view op, const at::Tensor& den) {
  if (den.numel() == 0) return;
  c10::NoGradGuard no_grad;
  auto bad = at::logical_or(den <= 0, at::logical_not(at::isfinite(den)));
  if (!bad.any().item<bool>()) return;
  double lo = den.min().item<double>();
  fail(op,
       "readout denominator not positive (min {} over {} positions); expected sum of "
       "kappa > 0 — the expanded state readout cancelled (large coordinates or an "
       "ill-conditioned L) or the inputs overflowed",
       lo, den.numel());
}

// Common checks of an HD evaluation call; returns the validated shape.
QkvShape check_hd_inputs(std::string_view op, const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& v, const LayerKernels& lk, bool longer_keys) {
  QkvShape s = check_qkv(op, q, k, v, longer_keys);
  lk.validate(op, s.dim);
  check(lk.heads() == s.q_heads, op, "kernels are for {} query heads, q has {} ({})",
        lk.heads(), s.q_heads, shape_str(q));
  return s;
}

// u = [v ; 1]: [B, Hkv, T, Dv] -> [B, Hkv, T, Dv + 1].
at::Tensor with_ones(const at::Tensor& v) {
  return at::cat({v, at::ones_like(v.narrow(-1, 0, 1))}, -1);
}

// ũ [B, Hkv, G, T, Dv+1] -> y [B, Hq, T, Dv] after the denominator check.
at::Tensor readout(std::string_view op, const at::Tensor& ut, const QkvShape& s,
                   at::ScalarType out) {
  auto den = ut.select(-1, s.value_dim);
  check_denominator(op, den);
  auto y = ut.narrow(-1, 0, s.value_dim) / den.unsqueeze(-1);
  return y.reshape({s.batch, s.q_heads, s.q_len, s.value_dim}).to(out);
}

}  // namespace

// ---- HdState -------------------------------------------------------------------------

HdState HdState::zeros(int64_t batch, int64_t kv_heads, int64_t dim, int64_t value_dim,
                       at::ScalarType dtype, at::Device device) {
  check(batch >= 1 && kv_heads >= 1 && dim >= 1 && value_dim >= 1, "hd_state",
        "batch, KV heads, D and Dv must be >= 1, got {}, {}, {}, {}", batch, kv_heads, dim,
        value_dim);
  check(dtype == at::kFloat || dtype == at::kDouble, "hd_state",
        "state dtype must be fp32 or fp64, got {}", c10::toString(dtype));
  HdState st;
  st.S = at::zeros({batch, kv_heads, hd_feature_dim(dim), value_dim + 1},
                   at::TensorOptions().dtype(dtype).device(device));
  return st;
}

int64_t HdState::dim() const {
  // Df = 1 + d + d(d+1)/2  =>  d² + 3d + 2 - 2 Df = 0.
  int64_t df = S.size(2);
  auto d = static_cast<int64_t>(std::llround((-3.0 + std::sqrt(1.0 + 8.0 * df)) / 2.0));
  check(hd_feature_dim(d) == df, "hd_state", "feature size {} is not 1 + d + d(d+1)/2", df);
  return d;
}

at::Tensor HdState::h0() const { return S.select(2, 0); }
at::Tensor HdState::h1() const { return S.narrow(2, 1, dim()); }
at::Tensor HdState::h2() const {
  int64_t d = dim();
  return S.narrow(2, 1 + d, d * (d + 1) / 2);
}
int64_t HdState::bytes() const {
  return S.defined() ? S.numel() * static_cast<int64_t>(S.element_size()) : 0;
}

// ---- References ----------------------------------------------------------------------

at::Tensor hd_pair_weights(const at::Tensor& q, const at::Tensor& k, const LayerKernels& lk) {
  constexpr std::string_view op = "hd_pair_weights";
  QkvShape s = check_hd_inputs(op, q, k, k, lk, /*longer_keys=*/true);
  auto ct = compute_dtype(q.scalar_type());
  auto kernels = lk.to_kernels();
  const double inv = 1.0 / std::sqrt(static_cast<double>(s.dim));
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < s.q_heads; ++h) {
    auto qh = q.select(1, h).to(ct);                         // [B, T, d]
    auto kh = k.select(1, h / s.group_size()).to(ct);        // [B, S, d]
    const auto& ker = kernels[h];
    auto L = ker.lower().to(ct);
    std::vector<at::Tensor> sbar{at::ones({s.batch, s.q_len, s.k_len}, q.options().dtype(ct))};
    for (const auto& grp : ker.groups()) {
      auto idx = at::tensor(grp, at::kLong).to(q.device());
      sbar.push_back(at::matmul(qh.index_select(-1, idx),
                                kh.index_select(-1, idx).transpose(-1, -2)) * inv);
    }
    auto w = at::full_like(sbar[0], ker.eps());
    const int64_t n = ker.num_groups() + 1;
    for (int64_t c = 0; c < n; ++c) {  // z_c = (Lᵀ s̄)_c = sum_{r >= c} L[r, c] s̄_r
      auto z = at::zeros_like(sbar[0]);
      for (int64_t r = c; r < n; ++r) z = z + L[r][c] * sbar[r];
      w = w + z * z;
    }
    heads.push_back(w);
  }
  return at::stack(heads, 1);
}

at::Tensor hd_pair_weights_expanded(const at::Tensor& q, const at::Tensor& k,
                                    const LayerKernels& lk) {
  constexpr std::string_view op = "hd_pair_weights_expanded";
  QkvShape s = check_hd_inputs(op, q, k, k, lk, /*longer_keys=*/true);
  auto ct = compute_dtype(q.scalar_type());
  auto kernels = lk.to_kernels();
  const double d = static_cast<double>(s.dim);
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < s.q_heads; ++h) {
    auto qh = q.select(1, h).to(ct);
    auto kh = k.select(1, h / s.group_size()).to(ct);
    auto c = kernels[h].coefficients();
    auto b = c.b.to(q.device(), ct), C = c.C.to(q.device(), ct);
    auto lin = at::matmul(qh * b, kh.transpose(-1, -2)) / std::sqrt(d);
    auto qq = (qh.unsqueeze(-1) * qh.unsqueeze(-2)) * C;  // [B, T, d, d]
    auto kk = kh.unsqueeze(-1) * kh.unsqueeze(-2);         // [B, S, d, d]
    auto quad = at::matmul(qq.flatten(-2), kk.flatten(-2).transpose(-1, -2)) / d;
    heads.push_back(c.a + lin + quad);
  }
  return at::stack(heads, 1);
}

at::Tensor hd_pairwise(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const LayerKernels& lk) {
  constexpr std::string_view op = "hd_pairwise";
  QkvShape s = check_hd_inputs(op, q, k, v, lk, /*longer_keys=*/false);
  auto ct = compute_dtype(q.scalar_type());
  auto w = hd_pair_weights(q, k, lk);  // [B, Hq, T, T]
  auto future = at::ones({s.q_len, s.k_len}, q.options().dtype(at::kBool)).triu(1);
  w = w.masked_fill(future, 0.0);
  auto wg = w.reshape({s.batch, s.kv_heads, s.group_size(), s.q_len, s.k_len});
  auto ut = at::matmul(wg, with_ones(v.to(ct)).unsqueeze(2));
  return readout(op, ut, s, q.scalar_type());
}

at::Tensor hd_recurrent(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const LayerKernels& lk) {
  constexpr std::string_view op = "hd_recurrent";
  QkvShape s = check_hd_inputs(op, q, k, v, lk, /*longer_keys=*/false);
  auto ct = compute_dtype(q.scalar_type());
  auto opts = q.options().dtype(ct);
  const int64_t B = s.batch, Hkv = s.kv_heads, G = s.group_size(), d = s.dim;
  const int64_t dv1 = s.value_dim + 1, P = d * (d + 1) / 2;
  // Coefficients a [Hq], b [Hq, d], C packed with multiplicity [Hq, P].
  auto kernels = lk.to_kernels();
  auto tri = at::triu_indices(d, d, 0, at::TensorOptions().dtype(at::kLong));
  auto ri = tri[0].to(q.device()), ti = tri[1].to(q.device());
  std::vector<at::Tensor> as, bs, cs;
  for (const auto& ker : kernels) {
    auto c = ker.coefficients();
    as.push_back(at::full({1}, c.a, at::kDouble));
    bs.push_back(c.b);
    auto Cp = c.C.index({tri[0], tri[1]});
    cs.push_back(at::where(tri[0] == tri[1], Cp, 2.0 * Cp));
  }
  auto a = at::cat(as).to(opts).view({1, Hkv, G, 1});
  auto b = at::stack(bs).to(opts).view({1, Hkv, G, d}) / std::sqrt(static_cast<double>(d));
  auto c = at::stack(cs).to(opts).view({1, Hkv, G, P}) / static_cast<double>(d);
  auto H0 = at::zeros({B, Hkv, dv1}, opts);
  auto H1 = at::zeros({B, Hkv, d, dv1}, opts);
  auto H2 = at::zeros({B, Hkv, P, dv1}, opts);
  auto qc = q.to(ct), kc = k.to(ct), uc = with_ones(v.to(ct));
  std::vector<at::Tensor> outs;
  for (int64_t t = 0; t < s.q_len; ++t) {
    auto kt = kc.select(2, t), ut = uc.select(2, t);  // [B, Hkv, d], [B, Hkv, dv+1]
    H0 = H0 + ut;                                                             // Eq. 5
    H1 = H1 + kt.unsqueeze(-1) * ut.unsqueeze(-2);
    H2 = H2 + (kt.index_select(-1, ri) * kt.index_select(-1, ti)).unsqueeze(-1) *
                  ut.unsqueeze(-2);
    auto qt = qc.select(2, t).reshape({B, Hkv, G, d});
    auto qq = qt.index_select(-1, ri) * qt.index_select(-1, ti);            // [B,Hkv,G,P]
    auto u = a * H0.unsqueeze(2) + at::matmul(b * qt, H1) + at::matmul(c * qq, H2);  // Eq. 6
    outs.push_back(u);
  }
  if (outs.empty()) return at::zeros({B, s.q_heads, 0, s.value_dim}, q.options());
  auto ut = at::stack(outs, 3);  // [B, Hkv, G, T, dv+1]
  return readout(op, ut, s, q.scalar_type());
}

// ---- Chunked / decode ------------------------------------------------------------------

namespace {

namespace kc = oal::kernels::cpu;

// Every check of an extend call (inputs, kernels, state against the inputs).
QkvShape check_extend(std::string_view op, const at::Tensor& q, const at::Tensor& k,
                      const at::Tensor& v, const LayerKernels& lk, const HdState& state,
                      const HdOptions& options) {
  QkvShape s = check_hd_inputs(op, q, k, v, lk, /*longer_keys=*/false);
  check(options.chunk >= 1, op, "chunk must be >= 1, got {}", options.chunk);
  auto ct = compute_dtype(q.scalar_type());
  check_dim(state.S, 4, op, "state S [B, Hkv, Df, Dv+1]");
  check(state.S.size(0) == s.batch && state.S.size(1) == s.kv_heads &&
            state.S.size(2) == hd_feature_dim(s.dim) && state.S.size(3) == s.value_dim + 1,
        op, "state S is {}, inputs need [{}, {}, {}, {}]", shape_str(state.S), s.batch,
        s.kv_heads, hd_feature_dim(s.dim), s.value_dim + 1);
  check(state.S.scalar_type() == ct, op, "state dtype {} does not match compute dtype {}",
        c10::toString(state.S.scalar_type()), c10::toString(ct));
  check(state.S.device() == q.device(), op, "state and inputs on different devices");
  return s;
}

// The CPU kernels on fp32 copies of the inputs; state.S (fp32) is updated in place.
// A single token with a workspace runs the fused decode step, anything else the chunked
// prefill kernel (without its readout when `readout` is false: an undefined tensor is
// returned). y [B, Hq, T, Dv] in q's dtype.
at::Tensor extend_kernel(const QkvShape& s, const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& v, const kc::OalPlan& plan, HdState& state,
                         int64_t chunk, kc::OalDecodeWorkspace* ws, bool readout) {
  if (!state.S.is_contiguous()) state.S = state.S.contiguous();
  auto qf = q.to(at::kFloat).contiguous(), kf = k.to(at::kFloat).contiguous();
  auto vf = v.to(at::kFloat).contiguous();
  at::Tensor y;
  if (readout) y = at::empty({s.batch, s.q_heads, s.q_len, s.value_dim}, qf.options());
  if (s.q_len == 1 && ws != nullptr && readout) {
    kc::oal_decode_step_f32(plan, s.kv_heads, qf.data_ptr<float>(), kf.data_ptr<float>(),
                            vf.data_ptr<float>(), y.data_ptr<float>(),
                            state.S.data_ptr<float>(), *ws);
  } else {
    kc::OalPrefillOptions o;
    o.chunk = chunk;
    kc::oal_prefill_f32(kernel_dims(s), plan, qf.data_ptr<float>(), kf.data_ptr<float>(),
                        vf.data_ptr<float>(), readout ? y.data_ptr<float>() : nullptr,
                        state.S.data_ptr<float>(), o);
  }
  state.tokens += s.q_len;
  return readout ? y.to(q.scalar_type()) : y;
}

// The differentiable ATen evaluation (intra-chunk factored weights + state readout).
at::Tensor extend_aten(std::string_view op, const QkvShape& s, const at::Tensor& q,
                       const at::Tensor& k, const at::Tensor& v, const LayerKernels& lk,
                       HdState& state, const HdOptions& options) {
  auto ct = compute_dtype(q.scalar_type());
  const bool recording = records_grad(q) || records_grad(k) || records_grad(v) || records_grad(lk.L) ||
                         records_grad(state.S);
  const int64_t B = s.batch, Hkv = s.kv_heads, Hq = s.q_heads, G = s.group_size();
  const int64_t n = lk.max_groups() + 1;
  const double inv = 1.0 / std::sqrt(static_cast<double>(s.dim));
  Prepared p = prepare(lk, ct, q.device());
  auto qc = q.to(ct), kc = k.to(ct), uc = with_ones(v.to(ct));
  at::Tensor S = state.S;
  bool state_empty = state.tokens == 0;
  std::vector<at::Tensor> outs;
  for (int64_t cs = 0; cs < s.q_len; cs += options.chunk) {
    int64_t tc = std::min(options.chunk, s.q_len - cs);
    auto qb = qc.narrow(2, cs, tc), kb = kc.narrow(2, cs, tc), ub = uc.narrow(2, cs, tc);
    // Intra-chunk, factored: z_c[i, j] = L[0, c] + sum_r q_ir L[g(r)+1, c] k_jr / sqrt(d).
    auto zq = (qb.unsqueeze(2) * p.z_weight.view({1, Hq, n, 1, s.dim}) * inv)
                  .reshape({B, Hkv, G, n, tc, s.dim});
    auto z = at::matmul(zq, kb.transpose(-1, -2).reshape({B, Hkv, 1, 1, s.dim, tc}))
                 .reshape({B, Hq, n, tc, tc}) +
             p.z_const.view({1, Hq, n, 1, 1});
    auto w = z.square().sum(2) + lk.eps;  // [B, Hq, tc, tc], >= eps
    auto future = at::ones({tc, tc}, q.options().dtype(at::kBool)).triu(1);
    w = w.masked_fill(future, 0.0);
    auto ut = at::matmul(w.reshape({B, Hkv, G, tc, tc}), ub.unsqueeze(2));
    // Inter-chunk: phiQ(q) · S_prev, the state of everything before this chunk.
    if (!state_empty) {
      auto fq = phi_q(qb, p).reshape({B, Hkv, G * tc, -1});
      ut = ut + at::matmul(fq, S).reshape({B, Hkv, G, tc, s.value_dim + 1});
    }
    auto upd = at::matmul(phi_k(kb).transpose(-1, -2), ub);  // [B, Hkv, Df, dv+1]
    S = recording ? S + upd : S.add_(upd);
    state_empty = false;
    outs.push_back(ut);
  }
  state.S = S;
  state.tokens += s.q_len;
  return readout(op, at::cat(outs, 3), s, q.scalar_type());
}

}  // namespace

std::string hd_kernel_blocker(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const LayerKernels& lk, const HdState& state,
                              const HdOptions& options) {
  if (options.backend == HdBackend::aten) return "the ATen backend was requested";
  if (!state.S.defined()) return "the state is undefined";
  std::string why = kernel_blocker(q, k, v);
  if (!why.empty()) return why;
  if (!state.S.device().is_cpu()) return "the state is not on the CPU";
  if (state.S.scalar_type() != at::kFloat) return "the state is not fp32";
  if (records_grad(lk.L) || records_grad(state.S))
    return "autograd is recording through L or the state (trainable kernels outside a "
           "NoGradGuard)";
  return "";
}

std::shared_ptr<const kc::OalPlan> OalPlanCache::get(const LayerKernels& lk) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool same = plan_ && l_data_ == lk.L.data_ptr() && l_version_ == lk.L._version() &&
                    g_data_ == lk.group_of.data_ptr() &&
                    g_version_ == lk.group_of._version() && eps_ == lk.eps;
  if (!same) {
    plan_ = std::make_shared<const kc::OalPlan>(
        kc::OalPlan::build(lk.group_of, lk.L.detach(), lk.eps));
    l_data_ = lk.L.data_ptr();
    l_version_ = lk.L._version();
    g_data_ = lk.group_of.data_ptr();
    g_version_ = lk.group_of._version();
    eps_ = lk.eps;
  }
  return plan_;
}

namespace {

std::shared_ptr<const kc::OalPlan> plan_for(const LayerKernels& lk, const HdOptions& options) {
  if (options.plan_cache) return options.plan_cache->get(lk);
  return std::make_shared<const kc::OalPlan>(kc::OalPlan::build(lk.group_of, lk.L.detach(), lk.eps));
}

}  // namespace

at::Tensor hd_extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const LayerKernels& lk, HdState& state, const HdOptions& options) {
  constexpr std::string_view op = "hd_chunked";
  QkvShape s = check_extend(op, q, k, v, lk, state, options);
  if (s.q_len == 0) return at::zeros({s.batch, s.q_heads, 0, s.value_dim}, q.options());
  // Dispatch point: the fp32 CPU kernel whenever it can run, the ATen code otherwise.
  if (hd_kernel_blocker(q, k, v, lk, state, options).empty())
    return extend_kernel(s, q, k, v, *plan_for(lk, options), state, options.chunk, nullptr, true);
  return extend_aten(op, s, q, k, v, lk, state, options);
}

HdPrefill hd_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const LayerKernels& kernels, const HdOptions& options,
                     const HdState* initial) {
  constexpr std::string_view op = "hd_chunked";
  QkvShape s = check_qkv(op, q, k, v, /*allow_longer_keys=*/false);
  HdPrefill out;
  if (initial) {
    check(initial->S.defined(), op, "initial state is undefined");
    out.state.S = initial->S.clone();  // the caller's state stays untouched
    out.state.tokens = initial->tokens;
  } else {
    out.state = HdState::zeros(s.batch, s.kv_heads, s.dim, s.value_dim,
                               compute_dtype(q.scalar_type()), q.device());
  }
  out.y = hd_extend(q, k, v, kernels, out.state, options);
  return out;
}

at::Tensor hd_step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const LayerKernels& kernels, HdState& state, const HdOptions& options) {
  constexpr std::string_view op = "hd_step";
  check_dim(q, 3, op, "q [B, Hq, D]");
  check_dim(k, 3, op, "k [B, Hkv, D]");
  check_dim(v, 3, op, "v [B, Hkv, Dv]");
  return hd_extend(q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2), kernels, state, options)
      .squeeze(2);
}

// ---- HdDecodeState -------------------------------------------------------------------

HdDecodeState::HdDecodeState(LayerKernels kernels, int64_t batch, HdOptions options)
    : kernels_(std::move(kernels)), batch_(batch), options_(std::move(options)) {
  check(batch >= 1, "hd_decode", "batch must be >= 1, got {}", batch);
  kernels_.validate("hd_decode");
  if (!options_.plan_cache) options_.plan_cache = std::make_shared<OalPlanCache>();
}

HdDecodeState::HdDecodeState(LayerKernels kernels, HdState state, HdOptions options)
    : kernels_(std::move(kernels)), batch_(state.batch()), options_(std::move(options)),
      state_(std::move(state)) {
  kernels_.validate("hd_decode", state_->dim());
  state_->S = state_->S.clone();  // extend() updates in place; the caller's state stays
  if (!options_.plan_cache) options_.plan_cache = std::make_shared<OalPlanCache>();
}

QkvShape HdDecodeState::check_tokens(const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v) {
  constexpr std::string_view op = "hd_decode";
  const QkvShape s = check_qkv(op, q, k, v, /*allow_longer_keys=*/false);
  check(s.batch == batch_, op, "state was made for batch {}, got q {}", batch_, shape_str(q));
  check(kernels_.heads() == s.q_heads && kernels_.group_of.size(1) == s.dim, op,
        "kernels are for Hq = {}, d = {}; q is {}", kernels_.heads(),
        kernels_.group_of.size(1), shape_str(q));
  if (!state_)
    state_ = HdState::zeros(s.batch, s.kv_heads, s.dim, s.value_dim,
                            compute_dtype(q.scalar_type()), q.device());
  check(state_->S.size(1) == s.kv_heads && state_->S.size(3) == s.value_dim + 1, op,
        "state S is {}, tokens have Hkv = {}, Dv = {}", shape_str(state_->S), s.kv_heads,
        s.value_dim);
  return s;
}

at::Tensor HdDecodeState::run_kernel(const QkvShape& s, const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, bool readout) {
  if (s.q_len == 1 && !ws_)
    ws_ = std::make_unique<kc::OalDecodeWorkspace>(s.batch, s.kv_heads, s.group_size(), s.dim,
                                                   s.value_dim);
  return extend_kernel(s, q, k, v, *options_.plan_cache->get(kernels_), *state_, options_.chunk,
                       ws_.get(), readout);
}

at::Tensor HdDecodeState::extend(const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v) {
  const QkvShape s = check_tokens(q, k, v);
  if (s.q_len > 0 && hd_kernel_blocker(q, k, v, kernels_, *state_, options_).empty())
    return run_kernel(s, q, k, v, /*readout=*/true);
  return hd_extend(q, k, v, kernels_, *state_, options_);
}

void HdDecodeState::absorb(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const QkvShape s = check_tokens(q, k, v);
  if (s.q_len > 0 && hd_kernel_blocker(q, k, v, kernels_, *state_, options_).empty())
    run_kernel(s, q, k, v, /*readout=*/false);
  else
    hd_extend(q, k, v, kernels_, *state_, options_);
}

}  // namespace oal::attn
