#include "oal/attention/softmax/softmax.h"

#include <cmath>
#include <limits>
#include <vector>

#include "oal/attention/qkv_shape.h"
#include "oal/attention/simd_path.h"
#include "oal/core/error.h"

namespace oal::attn {
namespace {

double resolve_scale(std::string_view op, std::optional<double> scale, int64_t dim) {
  double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(dim)));
  check(std::isfinite(s) && s > 0, op, "scale must be finite and positive, got {}", s);
  return s;
}

// q [B, Hq, T, D] -> [B, Hkv, G, T, D] in the compute dtype (query head h = kv * G + j).
at::Tensor group_queries(const at::Tensor& q, const AttentionDims& s, at::ScalarType ct) {
  return q.to(ct).reshape({s.batch, s.kv_heads, s.group_size(), s.q_len, s.dim});
}

// [B, Hkv, G, T, Dv] -> [B, Hq, T, Dv] in dtype `out`.
at::Tensor ungroup(const at::Tensor& y, const AttentionDims& s, at::ScalarType out) {
  return y.reshape({s.batch, s.q_heads, s.q_len, s.value_dim}).to(out);
}

// Boolean [tq, tk] mask, true where key ks + j lies after query position qs + i + offset.
at::Tensor future_mask(int64_t qs, int64_t tq, int64_t ks, int64_t tk, int64_t offset,
                       const at::Device& dev) {
  auto opts = at::TensorOptions().dtype(at::kLong).device(dev);
  auto qi = at::arange(qs + offset, qs + offset + tq, opts).unsqueeze(1);
  auto kj = at::arange(ks, ks + tk, opts).unsqueeze(0);
  return kj > qi;
}

}  // namespace

at::Tensor softmax_attention_naive(const at::Tensor& q, const at::Tensor& k,
                                   const at::Tensor& v, std::optional<double> scale) {
  constexpr std::string_view op = "softmax_attention_naive";
  AttentionDims s = check_qkv(op, q, k, v, /*allow_longer_keys=*/true);
  double sc = resolve_scale(op, scale, s.dim);
  auto ct = compute_dtype(q.scalar_type());
  auto qg = group_queries(q, s, ct);
  auto kk = k.to(ct).unsqueeze(2);  // [B, Hkv, 1, S, D]
  auto vv = v.to(ct).unsqueeze(2);  // [B, Hkv, 1, S, Dv]
  auto scores = at::matmul(qg, kk.transpose(-1, -2)) * sc;  // [B, Hkv, G, T, S]
  auto mask = future_mask(0, s.q_len, 0, s.k_len, s.offset(), q.device());
  scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  auto y = at::matmul(at::softmax(scores, -1), vv);
  return ungroup(y, s, q.scalar_type());
}

at::Tensor softmax_attention_tiled(const at::Tensor& q, const at::Tensor& k,
                                   const at::Tensor& v, int64_t block,
                                   std::optional<double> scale) {
  constexpr std::string_view op = "softmax_attention_tiled";
  AttentionDims s = check_qkv(op, q, k, v, /*allow_longer_keys=*/true);
  check(block >= 1, op, "block must be >= 1, got {}", block);
  double sc = resolve_scale(op, scale, s.dim);
  auto ct = compute_dtype(q.scalar_type());
  auto qg = group_queries(q, s, ct) * sc;
  auto kk = k.to(ct).unsqueeze(2);
  auto vv = v.to(ct).unsqueeze(2);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  std::vector<at::Tensor> outs;
  for (int64_t qs = 0; qs < s.q_len; qs += block) {
    int64_t tq = std::min(block, s.q_len - qs);
    auto qb = qg.narrow(3, qs, tq);
    int64_t k_end = qs + tq + s.offset();  // one past the last key any query here sees
    at::Tensor m, l, acc;
    // Key block 0 holds key 0, visible to every query, so m is finite after it and
    // exp(m_old - m_new) never sees inf - inf.
    for (int64_t ks = 0; ks < k_end; ks += block) {
      int64_t tk = std::min(block, k_end - ks);
      auto sc_blk = at::matmul(qb, kk.narrow(3, ks, tk).transpose(-1, -2));
      if (ks + tk - 1 > qs + s.offset())  // part of the block lies above the diagonal
        sc_blk = sc_blk.masked_fill(future_mask(qs, tq, ks, tk, s.offset(), q.device()),
                                    neg_inf);
      auto bm = std::get<0>(sc_blk.max(-1, /*keepdim=*/true));
      if (!m.defined()) {
        auto p = at::exp(sc_blk - bm);
        m = bm;
        l = p.sum(-1, true);
        acc = at::matmul(p, vv.narrow(3, ks, tk));
        continue;
      }
      auto m_new = at::maximum(m, bm);
      auto corr = at::exp(m - m_new);
      auto p = at::exp(sc_blk - m_new);
      l = l * corr + p.sum(-1, true);
      acc = acc * corr + at::matmul(p, vv.narrow(3, ks, tk));
      m = m_new;
    }
    outs.push_back(acc / l);
  }
  if (outs.empty())
    return at::zeros({s.batch, s.q_heads, 0, s.value_dim}, q.options());
  return ungroup(at::cat(outs, 3), s, q.scalar_type());
}

at::Tensor softmax_attention_flash(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   std::optional<double> scale,
                                   const simd::FlashOptions& options) {
  constexpr std::string_view op = "softmax_attention_flash";
  const AttentionDims s = check_qkv(op, q, k, v, /*allow_longer_keys=*/true);
  const std::string blocker = simd_blocker(q, k, v);
  check(blocker.empty(), op, "the CPU kernel cannot take these inputs: {}", blocker);
  check(options.q_block >= 1 && options.k_block >= 1, op, "block sizes must be >= 1");
  const at::Tensor qf = q.to(at::kFloat).contiguous(), kf = k.to(at::kFloat).contiguous();
  const at::Tensor vf = v.to(at::kFloat).contiguous();
  at::Tensor y = at::empty({s.batch, s.q_heads, s.q_len, s.value_dim}, qf.options());
  const double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(s.dim)));
  simd::flash_softmax_f32(s, qf.data_ptr<float>(), kf.data_ptr<float>(),
                                  vf.data_ptr<float>(), y.data_ptr<float>(), static_cast<float>(sc),
                                  options);
  return y.to(q.scalar_type());
}

}  // namespace oal::attn
