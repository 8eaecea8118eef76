// The CPU fast paths (src/oal/attention/fast_paths.h) against the core references:
// softmax_attention_naive, hd_pairwise, hd_recurrent and hd_chunked (ATen backend).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <vector>

#include "oal/attention/fast_paths.h"
#include "oal/attention/hd.h"
#include "oal/attention/quadratic.h"
#include "oal/attention/softmax.h"

namespace at_ = oal::attn;

namespace {

struct Qkv {
  at::Tensor q, k, v;
};

Qkv make_qkv(int64_t B, int64_t hq, int64_t hkv, int64_t T, int64_t S, int64_t d, int64_t dv,
             at::ScalarType dt, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return {at::randn({B, hq, T, d}, gen).to(dt), at::randn({B, hkv, S, d}, gen).to(dt),
          at::randn({B, hkv, S, dv}, gen).to(dt)};
}

// Per-head kernels with G groups (every group non-empty), Taylor-initialised then
// perturbed so heads differ and off-diagonal L entries are non-zero.
at_::LayerKernels make_kernels(int64_t hq, int64_t d, int64_t G, uint64_t seed) {
  std::vector<at_::QuadraticKernel> ks;
  for (int64_t h = 0; h < hq; ++h) {
    std::vector<std::vector<int64_t>> groups(static_cast<size_t>(G));
    for (int64_t r = 0; r < d; ++r) groups[static_cast<size_t>((r + h) % G)].push_back(r);  // d >= G: all non-empty
    ks.push_back(at_::QuadraticKernel::taylor(groups).perturbed(0.2, seed + h));
  }
  return at_::LayerKernels::from(ks, at::kDouble);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

}  // namespace

TEST(FastSoftmax, MatchesNaiveReference) {
  for (int64_t ratio : {1, 2, 7})
    for (int64_t T : {1, 63, 65, 257}) {
      const Qkv x = make_qkv(1, 2 * ratio, 2, T, T, 64, 64, at::kFloat, 10 + T);
      const auto r = at_::softmax_attention_fast(x.q, x.k, x.v);
      EXPECT_TRUE(r.notice.empty()) << r.notice;
      // fp32 both sides; outputs are convex combinations of N(0,1) values, errors ~1e-6.
      EXPECT_LT(max_abs_diff(r.y, at_::softmax_attention_naive(x.q, x.k, x.v)), 2e-5)
          << "ratio " << ratio << " T " << T;
    }
}

TEST(FastSoftmax, Bf16AndCachedPrefix) {
  const Qkv x = make_qkv(2, 7, 1, 5, 300, 64, 64, at::kBFloat16, 3);
  const auto r = at_::softmax_attention_fast(x.q, x.k, x.v);
  EXPECT_TRUE(r.notice.empty());
  EXPECT_EQ(r.y.scalar_type(), at::kBFloat16);
  // Same bf16 inputs, both compute in fp32; the only difference left is the final
  // rounding to bf16 (relative 2^-8 of |y| <= ~3): one bf16 ulp at most.
  EXPECT_LT(max_abs_diff(r.y, at_::softmax_attention_naive(x.q, x.k, x.v)), 2e-2);
}

TEST(FastSoftmax, FallsBackWithNoticeForFp64) {
  const Qkv x = make_qkv(1, 2, 1, 9, 9, 8, 8, at::kDouble, 4);
  const auto r = at_::softmax_attention_fast(x.q, x.k, x.v);
  EXPECT_FALSE(r.notice.empty());
  EXPECT_EQ(r.y.scalar_type(), at::kDouble);
  EXPECT_LT(max_abs_diff(r.y, at_::softmax_attention_naive(x.q, x.k, x.v)), 1e-12);
}

TEST(FastOalPrefill, MatchesPairwiseRecurrentAndChunked) {
  for (int64_t ratio : {1, 7})
    for (int64_t T : {1, 64, 65, 200}) {
      const int64_t d = 16, dv = 8;
      const Qkv x = make_qkv(1, 2 * ratio, 2, T, T, d, dv, at::kFloat, 20 + T);
      const auto ker = make_kernels(2 * ratio, d, 3, 5);
      at_::HdState st = at_::HdState::zeros(1, 2, d, dv);
      const auto r = at_::oal_prefill_fast(x.q, x.k, x.v, ker, 64, &st);
      EXPECT_TRUE(r.notice.empty()) << r.notice;
      // Reference weights are exact-positive fp32; the kernel's state readout is the
      // expanded fp32 form; outputs are kappa-weighted means of N(0,1) values: 1e-4.
      EXPECT_LT(max_abs_diff(r.y, at_::hd_pairwise(x.q, x.k, x.v, ker)), 1e-4) << T;
      EXPECT_LT(max_abs_diff(r.y, at_::hd_recurrent(x.q, x.k, x.v, ker)), 1e-4) << T;
      at_::HdOptions ho;
      ho.backend = at_::HdBackend::aten;
      const auto ref = at_::hd_chunked(x.q, x.k, x.v, ker, ho);
      // The state is a sum of T products of N(0,1)-sized features: fp32 relative 1e-5.
      EXPECT_TRUE(at::allclose(st.S, ref.state.S.to(at::kFloat), 1e-4, 1e-4)) << T;
      EXPECT_EQ(st.tokens, ref.state.tokens);
    }
}

TEST(FastOalPrefill, DimsAndBf16) {
  for (int64_t d : {8, 64})
    for (int64_t dv : {8, 64}) {
      const Qkv x = make_qkv(1, 7, 1, 70, 70, d, dv, at::kBFloat16, d + dv);
      const auto ker = make_kernels(7, d, 5, 9);
      const auto r = at_::oal_prefill_fast(x.q, x.k, x.v, ker, 16);
      EXPECT_TRUE(r.notice.empty());
      EXPECT_EQ(r.y.scalar_type(), at::kBFloat16);
      // Both paths see the same bf16 inputs and compute in fp32: one bf16 ulp of |y|.
      EXPECT_LT(max_abs_diff(r.y, at_::hd_pairwise(x.q, x.k, x.v, ker)), 3e-2) << d << " " << dv;
    }
}

TEST(FastOalPrefill, FallsBackUnderAutograd) {
  const Qkv x = make_qkv(1, 2, 1, 10, 10, 8, 8, at::kFloat, 6);
  const auto ker = make_kernels(2, 8, 2, 1);
  const at::Tensor q = x.q.clone().set_requires_grad(true);
  const auto r = at_::oal_prefill_fast(q, x.k, x.v, ker, 4);
  EXPECT_FALSE(r.notice.empty());
  EXPECT_TRUE(r.y.requires_grad());
  EXPECT_LT(max_abs_diff(r.y.detach(), at_::hd_pairwise(x.q, x.k, x.v, ker)), 1e-5);
}

TEST(FastOalDecode, StepsMatchRecurrentAndStateSizeIsConstant) {
  const int64_t d = 16, dv = 8, T = 30, ctx = 20;
  const Qkv x = make_qkv(2, 14, 2, T, T, d, dv, at::kFloat, 8);
  const auto ker = make_kernels(14, d, 4, 2);
  const at::Tensor ref = at_::hd_recurrent(x.q, x.k, x.v, ker);
  at_::OalFastDecodeState dec(ker, 2, 8);
  // Context through the prefill kernel, then one token at a time through the step.
  const at::Tensor y0 = dec.extend(x.q.narrow(2, 0, ctx), x.k.narrow(2, 0, ctx),
                                   x.v.narrow(2, 0, ctx));
  EXPECT_TRUE(dec.last_notice().empty());
  EXPECT_LT(max_abs_diff(y0, ref.narrow(2, 0, ctx)), 1e-4);
  const int64_t bytes = dec.state_bytes();
  EXPECT_EQ(bytes, 2 * 2 * at_::hd_feature_dim(d) * (dv + 1) * 4);
  for (int64_t t = ctx; t < T; ++t) {
    const at::Tensor y = dec.step(x.q.select(2, t), x.k.select(2, t), x.v.select(2, t));
    EXPECT_LT(max_abs_diff(y, ref.select(2, t)), 1e-4) << t;
  }
  EXPECT_EQ(dec.tokens(), T);
  EXPECT_EQ(dec.state_bytes(), bytes);
  // The same state as the reference decoder after the same tokens.
  at_::HdDecodeState hd(ker, 2);
  hd.extend(x.q, x.k, x.v);
  EXPECT_TRUE(at::allclose(dec.state()->S, hd.state()->S.to(at::kFloat), 1e-4, 1e-4));
}
