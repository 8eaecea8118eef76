#pragma once
// Helpers shared by the attention tests: seeded random inputs and relative errors.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstdint>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "oal/attention/oal/quadratic.h"
#include "oal/core/error.h"

namespace oal::test {

// ||a - b||_F / max(||b||_F, tiny), computed in fp64.
inline double rel_err(const at::Tensor& a, const at::Tensor& b) {
  auto ad = a.detach().to(at::kDouble), bd = b.detach().to(at::kDouble);
  double den = bd.norm().item<double>();
  return (ad - bd).norm().item<double>() / std::max(den, 1e-300);
}

// Seeded normal tensor with `scale`.
inline at::Tensor randn(std::vector<int64_t> shape, uint64_t seed, double scale = 1.0,
                        at::ScalarType dtype = at::kDouble) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, scale, shape, gen, at::TensorOptions().dtype(dtype));
}

// A partition of 0..d-1 into `g` groups: the last g-1 groups hold one "outlier"
// dimension each (spread across the range), group 0 the rest (the bulk).
inline std::vector<std::vector<int64_t>> outlier_groups(int64_t d, int64_t g) {
  std::vector<std::vector<int64_t>> groups(g);
  std::vector<bool> special(d, false);
  for (int64_t i = 1; i < g; ++i) {
    int64_t r = (i * 7 * d / 8 / g + 3 * i) % d;
    while (special[r]) r = (r + 1) % d;
    special[r] = true;
    groups[i].push_back(r);
  }
  for (int64_t r = 0; r < d; ++r)
    if (!special[r]) groups[0].push_back(r);
  return groups;
}

// Random kernels for `hq` heads: group counts cycling 1..gmax, L entries N(0, 0.5²)
// with a positive diagonal, eps 1e-3 (well away from 0 so fp32 stays well conditioned).
inline std::vector<oal::attn::QuadraticKernel> random_kernels(int64_t hq, int64_t d,
                                                              int64_t gmax, uint64_t seed,
                                                              double eps = 1e-3) {
  std::vector<oal::attn::QuadraticKernel> out;
  for (int64_t h = 0; h < hq; ++h) {
    int64_t g = 1 + h % gmax;
    if (g > d) g = d;
    int64_t n = g + 1;
    auto L = at::tril(randn({n, n}, seed + 17 * h, 0.5));
    L = L + at::diag(at::full({n}, 0.7, at::kDouble));
    out.push_back(oal::attn::QuadraticKernel::from_lower(outlier_groups(d, g), L, eps));
  }
  return out;
}

// κ for every (query, key) pair from lk.L by the factored formula, differentiably in q,
// k and L (fp64; a plain reference for the kernels' training paths):
// κ = eps + Σ_c (Σ_{r >= c} L[r][c] s̄_r)².  q [B, Hq, T, d], k [B, Hkv, S, d] -> [B, Hq, T, S]
inline at::Tensor kappa_from(const at::Tensor& q, const at::Tensor& k,
                             const oal::attn::LayerKernels& lk) {
  const int64_t Hq = q.size(1), group = Hq / k.size(1), d = q.size(3);
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < Hq; ++h) {
    const at::Tensor qh = q.select(1, h), kh = k.select(1, h / group);
    std::vector<at::Tensor> sbar{at::ones({q.size(0), q.size(2), k.size(2)}, at::kDouble)};
    for (int64_t g = 0; g < lk.groups[h]; ++g) {
      const at::Tensor msk = (lk.group_of[h] == g).to(at::kDouble);
      sbar.push_back(at::matmul(qh * msk, kh.transpose(-1, -2)) / std::sqrt(double(d)));
    }
    at::Tensor w = at::full_like(sbar[0], lk.eps);
    const int64_t n = int64_t(sbar.size());
    for (int64_t c = 0; c < n; ++c) {
      at::Tensor z = at::zeros_like(sbar[0]);
      for (int64_t r = c; r < n; ++r) z = z + lk.L[h][r][c] * sbar[r];
      w = w + z * z;
    }
    heads.push_back(w);
  }
  return at::stack(heads, 1);
}

// Runs fn and expects an oal::Error whose message contains every string in `needles`
// (typically the "[operation]" and what was expected).
template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an oal::Error";
  } catch (const oal::Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << n;
  }
}

}  // namespace oal::test
