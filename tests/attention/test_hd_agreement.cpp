// The four HD evaluations (pairwise O(N²), recurrent Eq. 5-6, chunked, decode) compute
// the same function across head dims, value dims, GQA ratios, lengths and chunk sizes.
#include <gtest/gtest.h>

#include "oal/attention/hd.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

// fp64: the evaluations differ only in summation order (and the expanded vs factored
// form of the same polynomial); with O(1) inputs that is ~1e-15 per term, so 1e-10
// relative leaves ample room even at N = 1000.
constexpr double k_fp64_tol = 1e-10;
// fp32 chunked vs the fp64 reference: fp32 rounding (6e-8) of features up to q_r q_t k_r
// k_t ~ 10 and of sums over up to 1000 keys gives ~1e-6..1e-5 relative; 1e-4 bounds it.
constexpr double k_fp32_tol = 1e-4;

struct Sweep {
  int64_t d, dv, ratio, B, Hkv;
  std::vector<int64_t> lengths;
  bool recurrent;  // include the (slow at large N·d²) token-by-token reference
};

void run_sweep(const Sweep& sw, uint64_t seed) {
  const int64_t Hq = sw.Hkv * sw.ratio;
  auto lk = LayerKernels::from(oal::test::random_kernels(Hq, sw.d, 4, seed));
  for (int64_t N : sw.lengths) {
    SCOPED_TRACE(testing::Message() << "d " << sw.d << " dv " << sw.dv << " ratio "
                                    << sw.ratio << " N " << N);
    // q, k scaled so that s = q·k/sqrt(d) is O(1), like real attention logits.
    auto q = randn({sw.B, Hq, N, sw.d}, seed + N, 1.0);
    auto k = randn({sw.B, sw.Hkv, N, sw.d}, seed + 2 * N + 1, 1.0);
    auto v = randn({sw.B, sw.Hkv, N, sw.dv}, seed + 3 * N + 2, 1.0);
    auto ref = hd_pairwise(q, k, v, lk);
    ASSERT_EQ(ref.sizes(), (std::vector<int64_t>{sw.B, Hq, N, sw.dv}));
    if (sw.recurrent) EXPECT_LT(rel_err(hd_recurrent(q, k, v, lk), ref), k_fp64_tol);
    for (int64_t chunk : {16, 64, 100}) {
      auto y = hd_chunked(q, k, v, lk, {.chunk = chunk}).y;
      EXPECT_LT(rel_err(y, ref), k_fp64_tol) << "chunk " << chunk;
    }
    auto yf = hd_chunked(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat), lk, {.chunk = 64}).y;
    EXPECT_EQ(yf.scalar_type(), at::kFloat);
    EXPECT_LT(rel_err(yf, ref), k_fp32_tol);
  }
}

// Every length with the small head dim (the references are cheap there).
TEST(HdAgreement, AllLengthsSmallHeadDim) {
  for (int64_t ratio : {1, 2, 7})
    run_sweep({8, 8, ratio, 1, ratio == 7 ? 1 : 2, {1, 2, 63, 64, 65, 257, 1000}, true}, 100 + ratio);
}

TEST(HdAgreement, HeadDim16WideValues) {
  run_sweep({16, 64, 2, 2, 1, {1, 63, 64, 65, 257}, true}, 200);
}

TEST(HdAgreement, HeadDim64) {
  for (int64_t dv : {8, 64})
    for (int64_t ratio : {1, 2, 7})
      run_sweep({64, dv, ratio, 1, 1, {2, 65, 257}, ratio != 2}, 300 + dv + ratio);
}

// The largest length with the largest head dim, recurrent reference left out (O(N d² dv)
// token-by-token is the slow part; pairwise covers it).
TEST(HdAgreement, HeadDim64Length1000) { run_sweep({64, 64, 7, 1, 1, {1000}, false}, 400); }

TEST(HdAgreement, Bf16InputsComputeInFp32) {
  auto lk = LayerKernels::from(oal::test::random_kernels(4, 16, 3, 7));
  auto q = randn({1, 4, 90, 16}, 1), k = randn({1, 2, 90, 16}, 2), v = randn({1, 2, 90, 8}, 3);
  auto qb = q.to(at::kBFloat16), kb = k.to(at::kBFloat16), vb = v.to(at::kBFloat16);
  auto y = hd_chunked(qb, kb, vb, lk, {.chunk = 32});
  EXPECT_EQ(y.y.scalar_type(), at::kBFloat16);
  EXPECT_EQ(y.state.S.scalar_type(), at::kFloat);  // state accumulates in fp32
  // Reference on the same bf16-rounded inputs; the bf16 output rounding (2^-9) dominates.
  auto ref = hd_pairwise(qb.to(at::kDouble), kb.to(at::kDouble), vb.to(at::kDouble), lk);
  EXPECT_LT(rel_err(y.y, ref), 5e-3);
}

}  // namespace
}  // namespace oal::attn
