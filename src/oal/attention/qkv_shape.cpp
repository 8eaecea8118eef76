#include "oal/attention/qkv_shape.h"

#include <c10/core/GradMode.h>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {

AttentionDims check_qkv(std::string_view op, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, bool allow_longer_keys, FiniteScan finite) {
  check_dim(q, 4, op, "q [B, Hq, T, D]");
  check_dim(k, 4, op, "k [B, Hkv, S, D]");
  check_dim(v, 4, op, "v [B, Hkv, S, Dv]");
  check_floating(q, op, "q");
  check_floating(k, op, "k");
  check_floating(v, op, "v");
  check(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(), op,
        "q, k, v must share one dtype, got {}, {}, {}", c10::toString(q.scalar_type()),
        c10::toString(k.scalar_type()), c10::toString(v.scalar_type()));
  check(q.device() == k.device() && q.device() == v.device(), op,
        "q, k, v must be on one device");
  AttentionDims s;
  s.batch = q.size(0);
  s.q_heads = q.size(1);
  s.q_len = q.size(2);
  s.dim = q.size(3);
  s.kv_heads = k.size(1);
  s.k_len = k.size(2);
  s.value_dim = v.size(3);
  check(k.size(0) == s.batch && v.size(0) == s.batch, op,
        "batch sizes differ: q {}, k {}, v {}", shape_str(q), shape_str(k), shape_str(v));
  check(k.size(3) == s.dim, op, "q and k head dims differ: q {}, k {}", shape_str(q),
        shape_str(k));
  check(v.size(1) == s.kv_heads && v.size(2) == s.k_len, op,
        "k and v must agree on [B, Hkv, S]: k {}, v {}", shape_str(k), shape_str(v));
  check(s.kv_heads > 0 && s.q_heads > 0 && s.q_heads % s.kv_heads == 0, op,
        "query heads ({}) must be a positive multiple of KV heads ({})", s.q_heads,
        s.kv_heads);
  check(s.dim > 0 && s.value_dim > 0, op, "head dims must be positive: q {}, v {}",
        shape_str(q), shape_str(v));
  if (allow_longer_keys)
    check(s.k_len >= s.q_len, op, "key length {} shorter than query length {}", s.k_len,
          s.q_len);
  else
    check(s.k_len == s.q_len, op, "q and k lengths differ: q {}, k {}", shape_str(q),
          shape_str(k));
  if (finite == FiniteScan::skip) return s;
  check_finite(q, op, "q");
  check_finite(k, op, "k");
  check_finite(v, op, "v");
  return s;
}

void check_denominator(std::string_view op, const at::Tensor& den, std::string_view what) {
  if (den.numel() == 0) return;
  c10::NoGradGuard no_grad;
  // NaN fails `den > 0`, +inf fails isfinite: one reduction covers both.
  if (at::logical_and(den > 0, at::isfinite(den)).all().item<bool>()) return;
  fail(op, "readout denominator not positive and finite (min {} over {} positions); {}",
       den.min().item<double>(), den.numel(), what);
}

at::ScalarType compute_dtype(at::ScalarType input) {
  return input == at::kDouble ? at::kDouble : at::kFloat;
}

}  // namespace oal::attn
