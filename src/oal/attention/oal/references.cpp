#include "oal/attention/oal/references.h"

#include <cmath>
#include <vector>

#include "oal/attention/oal/feature_map.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {

using namespace hd_detail;  // NOLINT: this module's own internal helpers

// ---- References ----------------------------------------------------------------------

at::Tensor hd_pair_weights(const at::Tensor& q, const at::Tensor& k, const LayerKernels& lk) {
  constexpr std::string_view op = "hd_pair_weights";
  AttentionDims s = check_hd_inputs(op, q, k, k, lk, /*longer_keys=*/true);
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
  AttentionDims s = check_hd_inputs(op, q, k, k, lk, /*longer_keys=*/true);
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
  AttentionDims s = check_hd_inputs(op, q, k, v, lk, /*longer_keys=*/false);
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
  AttentionDims s = check_hd_inputs(op, q, k, v, lk, /*longer_keys=*/false);
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

}  // namespace oal::attn
