#include "oal/attention/baselines/feature_linear.h"

#include <algorithm>
#include <limits>

#include "oal/attention/qkv_shape.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {
namespace {

constexpr std::string_view k_op = "feature_attention";
// Why a feature map's denominator (sum of phi(q) . phi(k) over the keys) fails.
constexpr std::string_view k_den_cause =
    "expected a positive sum of feature products — the feature weights underflowed or overflowed";

// The three inputs viewed with a shared-head axis: phi_q [B, Hf, g, T, F],
// phi_k [B, Hf, 1, T, F], v [B, Hf, 1, T, Dv], all in the compute dtype of phi_q.
struct Grouped {
  at::Tensor q, k, v;
  int64_t batch, q_heads, f_heads, group;
};

Grouped group_heads(const at::Tensor& phi_q, const at::Tensor& phi_k, const at::Tensor& v,
                    bool same_length) {
  check_dim(phi_q, 4, k_op, "phi_q [B, Hq, T, F]");
  check_dim(phi_k, 4, k_op, "phi_k [B, Hf, T, F]");
  check_dim(v, 4, k_op, "v [B, Hkv, T, Dv]");
  check_floating(phi_q, k_op, "phi_q");
  const int64_t B = phi_q.size(0), Hq = phi_q.size(1), Hf = phi_k.size(1), Hkv = v.size(1);
  check(phi_k.size(0) == B && v.size(0) == B, k_op, "batch sizes differ: {} {} {}",
        shape_str(phi_q), shape_str(phi_k), shape_str(v));
  check(phi_q.size(3) == phi_k.size(3), k_op, "feature sizes differ: phi_q {}, phi_k {}",
        shape_str(phi_q), shape_str(phi_k));
  check(phi_k.size(2) == v.size(2), k_op, "phi_k and v lengths differ: {} {}",
        shape_str(phi_k), shape_str(v));
  if (same_length)
    check(phi_q.size(2) == phi_k.size(2), k_op, "phi_q and phi_k lengths differ: {} {}",
          shape_str(phi_q), shape_str(phi_k));
  check(Hkv > 0 && Hq % Hkv == 0, k_op, "query heads {} not a multiple of KV heads {}", Hq,
        Hkv);
  check(Hf == Hkv || Hf == Hq, k_op, "key-feature heads {} must equal KV heads {} or query "
        "heads {}", Hf, Hkv, Hq);
  const auto dt = phi_q.scalar_type();
  Grouped g{{}, {}, {}, B, Hq, Hf, Hq / Hf};
  const int64_t T = phi_q.size(2), S = phi_k.size(2), F = phi_q.size(3);
  g.q = phi_q.reshape({B, Hf, g.group, T, F});
  g.k = phi_k.to(dt).unsqueeze(2);
  at::Tensor vv = v.to(dt);
  if (Hf != Hkv) vv = expand_kv_heads(vv, Hq);
  g.v = vv.unsqueeze(2);
  (void)S;
  return g;
}

at::Tensor ungroup(const at::Tensor& y, const Grouped& g) {
  return y.reshape({g.batch, g.q_heads, y.size(3), y.size(4)});
}

}  // namespace

at::Tensor expand_kv_heads(const at::Tensor& x, int64_t q_heads) {
  const int64_t Hkv = x.size(1);
  if (Hkv == q_heads) return x;
  const int64_t g = q_heads / Hkv;
  return x.unsqueeze(2)
      .expand({x.size(0), Hkv, g, x.size(2), x.size(3)})
      .reshape({x.size(0), q_heads, x.size(2), x.size(3)});
}

at::Tensor feature_attention_pairwise(const at::Tensor& phi_q, const at::Tensor& phi_k,
                                      const at::Tensor& v) {
  Grouped g = group_heads(phi_q, phi_k, v, true);
  const int64_t T = g.q.size(3);
  at::Tensor A = at::matmul(g.q, g.k.transpose(-1, -2));  // [B, Hf, g, T, T]
  A = A * at::ones({T, T}, A.options()).tril();
  at::Tensor den = A.sum(-1, true);
  check_denominator(k_op, den, k_den_cause);
  return ungroup(at::matmul(A, g.v) / den, g);
}

FeatureSums feature_sums_chunked(const at::Tensor& phi_q, const at::Tensor& phi_k,
                                 const at::Tensor& v, int64_t chunk, const FeaturePrefix* prefix) {
  check(chunk >= 1, k_op, "chunk must be >= 1, got {}", chunk);
  Grouped g = group_heads(phi_q, phi_k, v, true);
  const int64_t T = g.q.size(3), F = g.q.size(4), Dv = g.v.size(4);
  at::Tensor S, z;  // [B, Hf, 1, F, Dv], [B, Hf, 1, F, 1]
  if (prefix && !prefix->empty()) {
    S = prefix->S.to(g.q.scalar_type()).unsqueeze(2);
    z = prefix->z.to(g.q.scalar_type()).unsqueeze(2).unsqueeze(-1);
  } else {
    S = at::zeros({g.batch, g.f_heads, 1, F, Dv}, g.q.options());
    z = at::zeros({g.batch, g.f_heads, 1, F, 1}, g.q.options());
  }
  std::vector<at::Tensor> nums, dens;
  const at::Tensor tri = at::ones({chunk, chunk}, g.q.options()).tril();
  for (int64_t c0 = 0; c0 < T; c0 += chunk) {
    const int64_t n = std::min(chunk, T - c0);
    at::Tensor Qc = g.q.narrow(3, c0, n), Kc = g.k.narrow(3, c0, n), Vc = g.v.narrow(3, c0, n);
    at::Tensor A = at::matmul(Qc, Kc.transpose(-1, -2)) * tri.narrow(0, 0, n).narrow(1, 0, n);
    nums.push_back(at::matmul(A, Vc) + at::matmul(Qc, S));
    dens.push_back(A.sum(-1, true) + at::matmul(Qc, z));
    S = S + at::matmul(Kc.transpose(-1, -2), Vc);
    z = z + Kc.sum(3).unsqueeze(-1);
  }
  FeatureSums out;
  out.after.S = S.squeeze(2);
  out.after.z = z.squeeze(-1).squeeze(2);
  out.after.log_shift = prefix && prefix->log_shift.defined()
                            ? prefix->log_shift
                            : at::zeros({g.batch, g.f_heads}, g.q.options());
  if (T == 0) {
    out.num = at::zeros({g.batch, g.q_heads, 0, Dv}, g.q.options());
    out.den = at::zeros({g.batch, g.q_heads, 0}, g.q.options());
    return out;
  }
  out.num = ungroup(at::cat(nums, 3), g);
  out.den = ungroup(at::cat(dens, 3), g).squeeze(-1);
  return out;
}

at::Tensor feature_attention_chunked(const at::Tensor& phi_q, const at::Tensor& phi_k,
                                     const at::Tensor& v, int64_t chunk,
                                     FeaturePrefix* prefix) {
  FeatureSums sums = feature_sums_chunked(phi_q, phi_k, v, chunk, prefix);
  // Every denominator in one check (one reduction and read-back per call, not per
  // chunk), before the prefix changes: a failed call leaves the state as it was.
  if (sums.den.numel() > 0) check_denominator(k_op, sums.den, k_den_cause);
  if (prefix) *prefix = std::move(sums.after);
  return sums.num / sums.den.unsqueeze(-1);
}

namespace {

void check_positions(const std::vector<int64_t>& positions, int64_t T, int64_t P) {
  check(static_cast<int64_t>(positions.size()) == P, k_op,
        "{} positions given for {} query rows", positions.size(), P);
  for (size_t i = 0; i < positions.size(); ++i) {
    check(positions[i] >= 0 && positions[i] < T, k_op, "position {} outside [0, {})",
          positions[i], T);
    check(i == 0 || positions[i] > positions[i - 1], k_op,
          "positions must be strictly increasing ({} after {})", positions[i],
          i ? positions[i - 1] : 0);
  }
}

at::Tensor causal_row_mask(const std::vector<int64_t>& positions, int64_t S,
                           const at::TensorOptions& opt) {
  at::Tensor pos = at::tensor(positions, at::kLong).unsqueeze(1);
  return (at::arange(S, at::kLong).unsqueeze(0) <= pos).to(opt);
}

at::Tensor at_rows(const Grouped& g, const std::vector<int64_t>& positions) {
  const int64_t T = g.k.size(3);
  at::Tensor A = at::matmul(g.q, g.k.transpose(-1, -2));  // [B, Hf, g, P, T]
  A = A * causal_row_mask(positions, T, A.options());
  at::Tensor den = A.sum(-1, true);
  check_denominator(k_op, den, k_den_cause);
  return at::matmul(A, g.v) / den;
}

at::Tensor at_prefix(const Grouped& g, const std::vector<int64_t>& positions) {
  // Segment k holds keys (p_{k-1}, p_k]; prefix state at p_k = cumulative segment sums.
  std::vector<at::Tensor> seg_S, seg_z;
  int64_t start = 0;
  for (int64_t p : positions) {
    at::Tensor Kc = g.k.narrow(3, start, p + 1 - start), Vc = g.v.narrow(3, start, p + 1 - start);
    seg_S.push_back(at::matmul(Kc.transpose(-1, -2), Vc));  // [B, Hf, 1, F, Dv]
    seg_z.push_back(Kc.sum(3));                             // [B, Hf, 1, F]
    start = p + 1;
  }
  at::Tensor S = at::stack(seg_S, 3).cumsum(3);  // [B, Hf, 1, P, F, Dv]
  at::Tensor z = at::stack(seg_z, 3).cumsum(3);  // [B, Hf, 1, P, F]
  at::Tensor num = at::matmul(g.q.unsqueeze(-2), S).squeeze(-2);  // [B, Hf, g, P, Dv]
  at::Tensor den = (g.q * z).sum(-1, true);
  check_denominator(k_op, den, k_den_cause);
  return num / den;
}

}  // namespace

at::Tensor feature_attention_at(const at::Tensor& phi_q_rows, const at::Tensor& phi_k,
                                const at::Tensor& v, const std::vector<int64_t>& positions,
                                AtPath path) {
  Grouped g = group_heads(phi_q_rows, phi_k, v, false);
  const int64_t P = g.q.size(3), T = g.k.size(3), F = g.q.size(4), Dv = g.v.size(4);
  check_positions(positions, T, P);
  if (P == 0) return at::zeros({g.batch, g.q_heads, 0, Dv}, g.q.options());
  if (path == AtPath::automatic) {
    // Cost of kernel rows: P·T·F (+ P·T·Dv); of prefix states: T·F·Dv + P·F·Dv.
    const double rows = double(P) * T * (F + Dv), pre = double(T + P) * F * (Dv + 1);
    path = rows <= pre ? AtPath::rows : AtPath::prefix;
  }
  at::Tensor y = path == AtPath::rows ? at_rows(g, positions) : at_prefix(g, positions);
  return ungroup(y, g);
}

at::Tensor align_key_shift(FeaturePrefix& prefix, const at::Tensor& phi_k,
                           const at::Tensor& shift) {
  if (prefix.empty() || !prefix.log_shift.defined()) {
    prefix.log_shift = shift;
    return phi_k;
  }
  at::Tensor c = at::maximum(prefix.log_shift, shift);
  at::Tensor old_scale = at::exp(prefix.log_shift - c);
  prefix.S = prefix.S * old_scale.unsqueeze(-1).unsqueeze(-1).to(prefix.S.scalar_type());
  prefix.z = prefix.z * old_scale.unsqueeze(-1).to(prefix.z.scalar_type());
  prefix.log_shift = c;
  return phi_k * at::exp(shift - c).unsqueeze(-1).unsqueeze(-1).to(phi_k.scalar_type());
}

at::Tensor log_kernel_attention(const at::Tensor& log_kappa, const at::Tensor& v,
                                const std::vector<int64_t>& positions) {
  constexpr std::string_view op = "log_kernel_attention";
  check_dim(log_kappa, 4, op, "log_kappa [B, Hq, P, S]");
  check_dim(v, 4, op, "v [B, Hkv, S, Dv]");
  const int64_t P = log_kappa.size(2), S = log_kappa.size(3), Hq = log_kappa.size(1);
  check(v.size(2) == S && Hq % v.size(1) == 0, op, "log_kappa {} and v {} disagree",
        shape_str(log_kappa), shape_str(v));
  std::vector<int64_t> pos = positions;
  if (pos.empty())
    for (int64_t p = 0; p < P; ++p) pos.push_back(S - P + p);
  check_positions(pos, S, P);
  at::Tensor mask = causal_row_mask(pos, S, at::TensorOptions().dtype(at::kBool));
  at::Tensor lk =
      log_kappa.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  at::Tensor w = at::softmax(lk, -1);
  check(at::isfinite(w).all().item<bool>(), op,
        "kernel weights are not finite (a log-kernel entry is NaN or +inf)");
  return at::matmul(w, expand_kv_heads(v.to(w.scalar_type()), Hq));
}

}  // namespace oal::attn
