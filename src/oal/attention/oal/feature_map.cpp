#include "oal/attention/oal/feature_map.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn::hd_detail {

// Flat index r * d + t of the pairs r <= t in the packed H2 order (triu_indices order).
at::Tensor packed_pair_index(int64_t d, const at::Device& dev) {
  auto tri = at::triu_indices(d, d, 0, at::TensorOptions().dtype(at::kLong).device(dev));
  return tri[0] * d + tri[1];
}

namespace {

// Multiplicity m_rt of each packed pair: 1 on the diagonal, 2 off it.
at::Tensor packed_pair_multiplicity(int64_t d, at::ScalarType ct, const at::Device& dev) {
  auto tri = at::triu_indices(d, d, 0, at::TensorOptions().dtype(at::kLong).device(dev));
  return 2.0 - (tri[0] == tri[1]).to(ct);
}

}  // namespace


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

at::Tensor intra_chunk_sums(const at::Tensor& qb, const at::Tensor& kb, const at::Tensor& ub,
                            const Prepared& p, double eps) {
  const int64_t B = qb.size(0), Hq = qb.size(1), tc = qb.size(2), d = qb.size(3);
  const int64_t Hkv = kb.size(1), G = Hq / Hkv, n = p.z_const.size(1);
  const double inv = 1.0 / std::sqrt(static_cast<double>(d));
  // z_c[i, j] = L[0, c] + sum_r q_ir L[g(r)+1, c] k_jr / sqrt(d).
  auto zq = (qb.unsqueeze(2) * p.z_weight.view({1, Hq, n, 1, d}) * inv)
                .reshape({B, Hkv, G, n, tc, d});
  auto z = at::matmul(zq, kb.transpose(-1, -2).reshape({B, Hkv, 1, 1, d, tc}))
               .reshape({B, Hq, n, tc, tc}) +
           p.z_const.view({1, Hq, n, 1, 1});
  auto w = z.square().sum(2) + eps;  // [B, Hq, tc, tc], >= eps
  auto future = at::ones({tc, tc}, qb.options().dtype(at::kBool)).triu(1);
  w = w.masked_fill(future, 0.0);
  return at::matmul(w.reshape({B, Hkv, G, tc, tc}), ub.unsqueeze(2));
}

at::Tensor state_reads(const at::Tensor& qb, const Prepared& p, const at::Tensor& S) {
  const int64_t B = qb.size(0), Hq = qb.size(1), tc = qb.size(2);
  const int64_t Hkv = S.size(1), G = Hq / Hkv;
  auto fq = phi_q(qb, p).reshape({B, Hkv, G * tc, -1});
  return at::matmul(fq, S).reshape({B, Hkv, G, tc, S.size(3)});
}

at::Tensor state_update(const at::Tensor& kb, const at::Tensor& ub) {
  return at::matmul(phi_k(kb).transpose(-1, -2), ub);
}

at::Tensor chunked_sums(const at::Tensor& qc, const at::Tensor& kc, const at::Tensor& uc,
                        const Prepared& p, double eps, at::Tensor& S, bool state_empty,
                        int64_t chunk) {
  const bool recording = c10::GradMode::is_enabled() &&
                         (qc.requires_grad() || kc.requires_grad() || uc.requires_grad() ||
                          S.requires_grad() || p.phi_a.requires_grad());
  std::vector<at::Tensor> outs;
  for (int64_t cs = 0; cs < qc.size(2); cs += chunk) {
    const int64_t tc = std::min(chunk, qc.size(2) - cs);
    const at::Tensor qb = qc.narrow(2, cs, tc), kb = kc.narrow(2, cs, tc), ub = uc.narrow(2, cs, tc);
    at::Tensor ut = intra_chunk_sums(qb, kb, ub, p, eps);
    // Inter-chunk: phiQ(q) · S_prev, the state of everything before this chunk.
    if (!state_empty) ut = ut + state_reads(qb, p, S);
    const at::Tensor update = state_update(kb, ub);
    S = recording ? S + update : S.add_(update);
    state_empty = false;
    outs.push_back(ut);
  }
  return at::cat(outs, 3);
}

AttentionDims check_hd_inputs(std::string_view op, const at::Tensor& q, const at::Tensor& k,
                              const at::Tensor& v, const LayerKernels& lk, bool longer_keys,
                              bool kernels_validated) {
  AttentionDims s = check_qkv(op, q, k, v, longer_keys);
  if (kernels_validated)
    check(lk.dim() == s.dim, op, "kernels have d = {}, inputs have D = {}", lk.dim(), s.dim);
  else
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
at::Tensor readout(std::string_view op, const at::Tensor& ut, const AttentionDims& s,
                   at::ScalarType out) {
  auto den = ut.select(-1, s.value_dim);
  check_denominator(op, den,
                    "expected sum of kappa > 0 — the expanded state readout cancelled (large "
                    "coordinates or an ill-conditioned L) or the inputs overflowed");
  auto y = ut.narrow(-1, 0, s.value_dim) / den.unsqueeze(-1);
  return y.reshape({s.batch, s.q_heads, s.q_len, s.value_dim}).to(out);
}

}  // namespace oal::attn::hd_detail
