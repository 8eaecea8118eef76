// The HD state: prefill then decode equals one prefill; the state is per KV head (equal
// to a repeated-KV evaluation); its layout is the documented H0 / H1 / packed H2.
#include <gtest/gtest.h>

#include <cmath>

#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/references.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

// fp64: only summation order differs between the paths compared here.
constexpr double k_tol = 1e-11;

struct Inputs {
  at::Tensor q, k, v;
};
Inputs make_inputs(int64_t B, int64_t Hq, int64_t Hkv, int64_t N, int64_t d, int64_t dv,
                   uint64_t seed) {
  return {randn({B, Hq, N, d}, seed), randn({B, Hkv, N, d}, seed + 1),
          randn({B, Hkv, N, dv}, seed + 2)};
}

TEST(HdState, PrefillThenDecodeEqualsOnePrefill) {
  auto lk = LayerKernels::from(oal::test::random_kernels(6, 16, 3, 11));
  const int64_t N = 45, M = 23;  // N not a multiple of the chunk
  auto in = make_inputs(2, 6, 3, N + M, 16, 8, 21);
  auto full = hd_chunked(in.q, in.k, in.v, lk, {.chunk = 16});
  auto pre = hd_chunked(in.q.narrow(2, 0, N), in.k.narrow(2, 0, N), in.v.narrow(2, 0, N), lk,
                        {.chunk = 16});
  EXPECT_EQ(pre.state.tokens, N);
  // (a) token by token with hd_step on the prefill's state
  HdState st = pre.state;
  st.S = st.S.clone();
  std::vector<at::Tensor> ys{pre.y};
  for (int64_t t = N; t < N + M; ++t)
    ys.push_back(hd_step(in.q.select(2, t), in.k.select(2, t), in.v.select(2, t), lk, st).unsqueeze(2));
  EXPECT_LT(rel_err(at::cat(ys, 2), full.y), k_tol);
  EXPECT_LT(rel_err(st.S, full.state.S), k_tol);
  EXPECT_EQ(st.tokens, N + M);
  // (b) hd_chunked continuing the initial state leaves that state untouched
  auto before = pre.state.S.clone();
  auto rest = hd_chunked(in.q.narrow(2, N, M), in.k.narrow(2, N, M), in.v.narrow(2, N, M), lk,
                         {.chunk = 7}, &pre.state);
  EXPECT_TRUE(at::equal(pre.state.S, before));
  EXPECT_LT(rel_err(at::cat({pre.y, rest.y}, 2), full.y), k_tol);
  // (c) the decoder built from the prefill state, mixing a block and single steps
  HdDecodeState dec(lk, pre.state);
  std::vector<at::Tensor> zs{pre.y, dec.extend(in.q.narrow(2, N, 5), in.k.narrow(2, N, 5),
                                               in.v.narrow(2, N, 5))};
  for (int64_t t = N + 5; t < N + M; ++t)
    zs.push_back(dec.step(in.q.select(2, t), in.k.select(2, t), in.v.select(2, t)).unsqueeze(2));
  EXPECT_LT(rel_err(at::cat(zs, 2), full.y), k_tol);
  EXPECT_EQ(dec.tokens(), N + M);
}

TEST(HdState, DecodeFromEmptyMatchesPairwiseAndHasConstantSize) {
  auto kernels = oal::test::random_kernels(4, 8, 2, 5);
  auto m = QuadraticAttention::from_kernels(kernels);
  auto in = make_inputs(1, 4, 2, 30, 8, 4, 31);
  auto st = m.new_state(1);
  EXPECT_EQ(st->state_bytes(), 0);
  std::vector<at::Tensor> ys;
  int64_t bytes = -1;
  for (int64_t t = 0; t < 30; ++t) {
    ys.push_back(st->step(in.q.select(2, t), in.k.select(2, t), in.v.select(2, t)).unsqueeze(2));
    if (t == 0) bytes = st->state_bytes();
    EXPECT_EQ(st->state_bytes(), bytes);  // constant in the number of tokens
  }
  // [B, Hkv, Df, Dv+1] fp64 = 1 * 2 * (1 + 8 + 36) * 5 * 8 bytes
  EXPECT_EQ(bytes, 2 * 45 * 5 * 8);
  EXPECT_LT(rel_err(at::cat(ys, 2), hd_pairwise(in.q, in.k, in.v, LayerKernels::from(kernels))),
            k_tol);
}

TEST(HdState, OneStatePerKvHeadEqualsRepeatedKvReference) {
  const int64_t Hkv = 2, ratio = 3, Hq = Hkv * ratio;
  auto lk = LayerKernels::from(oal::test::random_kernels(Hq, 8, 3, 41));
  auto in = make_inputs(1, Hq, Hkv, 40, 8, 5, 51);
  auto gqa = hd_chunked(in.q, in.k, in.v, lk, {.chunk = 16});
  // Reference: every query head with its own copy of its KV head (ratio 1).
  auto k_rep = in.k.repeat_interleave(ratio, 1), v_rep = in.v.repeat_interleave(ratio, 1);
  auto rep = hd_chunked(in.q, k_rep, v_rep, lk, {.chunk = 16});
  EXPECT_LT(rel_err(gqa.y, rep.y), k_tol);
  EXPECT_EQ(gqa.state.S.size(1), Hkv);
  EXPECT_EQ(rep.state.S.size(1), Hq);
  for (int64_t h = 0; h < Hq; ++h)  // query head h's repeated state == its KV head's state
    EXPECT_TRUE(at::allclose(rep.state.S.select(1, h), gqa.state.S.select(1, h / ratio), 1e-13, 0));
  EXPECT_LT(rel_err(hd_pairwise(in.q, k_rep, v_rep, lk), gqa.y), k_tol);
}

TEST(HdState, LayoutIsH0H1PackedH2) {
  const int64_t d = 5, dv = 3, N = 9;
  auto lk = LayerKernels::from(oal::test::random_kernels(1, d, 2, 61));
  auto in = make_inputs(1, 1, 1, N, d, dv, 71);
  auto st = hd_chunked(in.q, in.k, in.v, lk, {.chunk = 4}).state;
  ASSERT_EQ(st.S.sizes(), (std::vector<int64_t>{1, 1, simd::oal_feature_dim(d), dv + 1}));
  EXPECT_EQ(st.dim(), d);
  EXPECT_EQ(st.value_dim(), dv);
  auto k = in.k[0][0], u = at::cat({in.v[0][0], at::ones({N, 1}, at::kDouble)}, 1);
  // Direct sums written out per entry (Eq. 5).
  EXPECT_TRUE(at::allclose(st.h0()[0][0], u.sum(0), 1e-13, 1e-13));
  for (int64_t r = 0; r < d; ++r)
    EXPECT_TRUE(at::allclose(st.h1()[0][0][r], (k.select(1, r).unsqueeze(1) * u).sum(0), 1e-13, 1e-13));
  int64_t p = 0;
  for (int64_t r = 0; r < d; ++r)
    for (int64_t t = r; t < d; ++t, ++p) {
      auto want = (k.select(1, r) * k.select(1, t)).unsqueeze(1) * u;
      EXPECT_TRUE(at::allclose(st.h2()[0][0][p], want.sum(0), 1e-13, 1e-13)) << r << "," << t;
      // p(r, t) = r d - r (r - 1) / 2 + (t - r), as documented in chunked_attention.h
      EXPECT_EQ(p, r * d - r * (r - 1) / 2 + (t - r));
    }
  EXPECT_EQ(p, d * (d + 1) / 2);
  EXPECT_EQ(st.bytes(), simd::oal_feature_dim(d) * (dv + 1) * 8);
}

}  // namespace
}  // namespace oal::attn
