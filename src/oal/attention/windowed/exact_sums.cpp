#include "oal/attention/windowed/exact_sums.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "oal/attention/simd_path.h"

namespace oal::attn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One block of query rows and the key rows it reads: the sinks [0, sinks_held) and the
// band rows [band, band + band_len) of all_k / all_v.
struct Block {
  int64_t c0 = 0, n = 0;          // query rows [c0, c0 + n)
  int64_t band = 0, band_len = 0;
  at::Tensor kpos;                // [nk] positions of the keys read
};

struct Geometry {
  int64_t p0, sinks_held, first_pos;
  Window window;

  Block block(int64_t c0, int64_t T) const {
    Block b;
    b.c0 = c0;
    b.n = std::min(k_exact_chunk, T - c0);
    const int64_t qa = p0 + c0, qb = qa + b.n;
    const int64_t lo = std::max({window.sinks, qa - window.recent + 1, first_pos});
    const auto lng = at::TensorOptions().dtype(at::kLong);
    b.kpos = at::arange(0, sinks_held, lng);
    if (lo < qb) {
      b.band = sinks_held + lo - first_pos;
      b.band_len = qb - lo;
      b.kpos = at::cat({b.kpos, at::arange(lo, qb, lng)});
    }
    return b;
  }
};

at::Tensor block_rows(const at::Tensor& t, const Geometry& g, const Block& b) {
  const at::Tensor sinks = t.narrow(2, 0, g.sinks_held);
  return b.band_len == 0 ? sinks : at::cat({sinks, t.narrow(2, b.band, b.band_len)}, 2);
}

// A block's scores s [B, Hkv, G, n, nk] (-inf off the exact keys), its row max m
// [B, Hq, n] and weights p = exp(s - m) [B, Hq, n, nk] (0 off the exact keys).
struct Scores {
  at::Tensor m, p;
};

Scores block_scores(const at::Tensor& q, const at::Tensor& keys, const Geometry& g,
                    const Block& b) {
  const int64_t B = q.size(0), Hq = q.size(1), D = q.size(3), Hkv = keys.size(1);
  const int64_t G = Hq / Hkv, nk = keys.size(2);
  const double ninf = -std::numeric_limits<double>::infinity();
  const at::Tensor qb = q.narrow(2, b.c0, b.n).reshape({B, Hkv, G, b.n, D});
  at::Tensor s = at::matmul(qb, keys.unsqueeze(2).transpose(-1, -2)) / std::sqrt(double(D));
  const at::Tensor qpos = at::arange(g.p0 + b.c0, g.p0 + b.c0 + b.n, b.kpos.options());
  const at::Tensor mask = exact_mask(qpos, b.kpos, g.window).to(q.device());
  s = s.masked_fill(mask.logical_not(), ninf).reshape({B, Hq, b.n, nk});
  Scores out;
  out.m = nk > 0 ? std::get<0>(s.max(-1)) : at::full({B, Hq, b.n}, ninf, s.options());
  const at::Tensor m_safe = at::where(at::isfinite(out.m), out.m, at::zeros_like(out.m));
  out.p = (s - m_safe.unsqueeze(-1)).exp();  // exp(-inf) = 0 off the exact keys
  return out;
}

// The block loop without autograd: m, a, z.
ExactSums block_sums(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const Geometry& g) {
  const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), Hkv = k.size(1);
  const int64_t G = Hq / Hkv, Dv = v.size(3);
  std::vector<at::Tensor> ms, as, zs;
  for (int64_t c0 = 0; c0 < T; c0 += k_exact_chunk) {
    const Block b = g.block(c0, T);
    const Scores sc = block_scores(q, block_rows(k, g, b), g, b);
    const int64_t nk = sc.p.size(-1);
    ms.push_back(sc.m);
    zs.push_back(sc.p.sum(-1));
    as.push_back(at::matmul(sc.p.reshape({B, Hkv, G * b.n, nk}), block_rows(v, g, b))
                     .reshape({B, Hq, b.n, Dv}));
  }
  return {at::cat(ms, 2), at::cat(as, 2), at::cat(zs, 2)};
}

// Adds a block's key-row gradient [B, Hkv, nk, X] to the sinks' and the band's rows.
void add_block_rows(at::Tensor& into, const at::Tensor& rows, const Geometry& g,
                    const Block& b) {
  into.narrow(2, 0, g.sinks_held).add_(rows.narrow(2, 0, g.sinks_held));
  if (b.band_len > 0) into.narrow(2, b.band, b.band_len).add_(rows.narrow(2, g.sinks_held, b.band_len));
}

struct ExactTrain : torch::autograd::Function<ExactTrain> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, int64_t p0, int64_t sinks_held,
                               int64_t first_pos, int64_t sinks, int64_t recent) {
    const Geometry g{p0, sinks_held, first_pos, Window{sinks, recent}};
    ExactSums out = block_sums(q, k, v, g);
    ctx->save_for_backward({q, k, v});
    ctx->saved_data["p0"] = p0;
    ctx->saved_data["sinks_held"] = sinks_held;
    ctx->saved_data["first_pos"] = first_pos;
    ctx->saved_data["sinks"] = sinks;
    ctx->saved_data["recent"] = recent;
    ctx->mark_non_differentiable({out.m});
    return {out.m, out.a, out.z};
  }

  // Per block, with P the weights and dA, dz the gradients of a and z:
  //   dP = dA Vᵀ + dz,  dS = P ∘ dP,  dQ = dS K / √D,  dK = dSᵀ Q / √D,  dV = Pᵀ dA.
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2];
    const Geometry g{ctx->saved_data["p0"].toInt(), ctx->saved_data["sinks_held"].toInt(),
                     ctx->saved_data["first_pos"].toInt(),
                     Window{ctx->saved_data["sinks"].toInt(), ctx->saved_data["recent"].toInt()}};
    const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3);
    const int64_t Hkv = k.size(1), G = Hq / Hkv, Dv = v.size(3);
    const at::Tensor da = grad[1].defined() ? grad[1] : at::zeros({B, Hq, T, Dv}, q.options());
    const at::Tensor dz = grad[2].defined() ? grad[2] : at::zeros({B, Hq, T}, q.options());
    at::Tensor dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
    const double inv = 1.0 / std::sqrt(double(D));
    for (int64_t c0 = 0; c0 < T; c0 += k_exact_chunk) {
      const Block b = g.block(c0, T);
      const at::Tensor keys = block_rows(k, g, b), vals = block_rows(v, g, b);
      const int64_t nk = keys.size(2), rows = G * b.n;
      const at::Tensor p = block_scores(q, keys, g, b).p.reshape({B, Hkv, rows, nk});
      const at::Tensor dab = da.narrow(2, c0, b.n).reshape({B, Hkv, rows, Dv});
      const at::Tensor dzb = dz.narrow(2, c0, b.n).reshape({B, Hkv, rows, 1});
      const at::Tensor ds = p * (at::matmul(dab, vals.transpose(-1, -2)) + dzb);
      const at::Tensor qb = q.narrow(2, c0, b.n).reshape({B, Hkv, rows, D});
      dq.narrow(2, c0, b.n).add_((at::matmul(ds, keys) * inv).reshape({B, Hq, b.n, D}));
      add_block_rows(dk, at::matmul(ds.transpose(-1, -2), qb) * inv, g, b);
      add_block_rows(dv, at::matmul(p.transpose(-1, -2), dab), g, b);
    }
    return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

ExactSums exact_sums(const at::Tensor& q, const at::Tensor& all_k, const at::Tensor& all_v,
                     int64_t p0, int64_t sinks_held, const Window& window) {
  // Keys after the sinks have consecutive positions from first_pos (ring, then new).
  const int64_t first_pos = p0 + q.size(2) - (all_k.size(2) - sinks_held);
  const Geometry g{p0, sinks_held, first_pos, window};
  if (!(records_grad(q) || records_grad(all_k) || records_grad(all_v)))
    return block_sums(q, all_k, all_v, g);
  const variable_list out =
      ExactTrain::apply(q, all_k, all_v, p0, sinks_held, first_pos, window.sinks, window.recent);
  return {out[0], out[1], out[2]};
}

}  // namespace oal::attn
