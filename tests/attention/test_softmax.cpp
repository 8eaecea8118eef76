// Exact softmax attention: naive (materialised scores) vs tiled online softmax, and the
// KV-cache decode state vs the full forward.
#include <gtest/gtest.h>

#include <cmath>

#include "oal/attention/softmax/softmax.h"
#include "oal/attention/softmax/softmax_method.h"
#include "oal/core/error.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

// Direct per-(head, query) loop in fp64: the definition, independent of both kernels.
at::Tensor softmax_loop(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3), Hkv = k.size(1);
  int64_t S = k.size(2), off = S - T;
  auto y = at::zeros({B, Hq, T, v.size(3)}, at::kDouble);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < T; ++i) {
        auto kk = k[b][h / (Hq / Hkv)].narrow(0, 0, i + off + 1);
        auto vv = v[b][h / (Hq / Hkv)].narrow(0, 0, i + off + 1);
        auto sc = at::matmul(kk, q[b][h][i]) / std::sqrt(static_cast<double>(D));
        y[b][h][i] = at::matmul(at::softmax(sc, 0), vv);
      }
  return y;
}

TEST(Softmax, NaiveAndTiledMatchTheDefinition) {
  struct Case { int64_t B, Hq, Hkv, T, D, Dv, block; };
  for (Case c : {Case{1, 1, 1, 1, 8, 8, 4}, Case{2, 2, 1, 7, 8, 3, 3}, Case{1, 7, 1, 65, 16, 8, 16},
                 Case{1, 4, 2, 33, 16, 64, 64}, Case{1, 2, 2, 100, 8, 8, 1}}) {
    auto q = randn({c.B, c.Hq, c.T, c.D}, 1, 2.0), k = randn({c.B, c.Hkv, c.T, c.D}, 2, 2.0);
    auto v = randn({c.B, c.Hkv, c.T, c.Dv}, 3);
    auto ref = softmax_loop(q, k, v);
    // fp64 throughout: only summation order differs.
    EXPECT_LT(rel_err(softmax_attention_naive(q, k, v), ref), 1e-12) << c.T << " " << c.Hq;
    EXPECT_LT(rel_err(softmax_attention_tiled(q, k, v, c.block), ref), 1e-12) << c.T;
  }
}

TEST(Softmax, TiledMatchesNaiveAcrossShapesAndDtypes) {
  for (int64_t T : {1, 2, 63, 64, 65, 257})
    for (int64_t ratio : {1, 2, 7})
      for (int64_t block : {16, 64, 100}) {
        int64_t Hkv = 2, Hq = Hkv * ratio;
        auto q = randn({1, Hq, T, 16}, 10 + T, 1.5), k = randn({1, Hkv, T, 16}, 20 + T, 1.5);
        auto v = randn({1, Hkv, T, 8}, 30 + T);
        auto ref = softmax_attention_naive(q, k, v);
        EXPECT_LT(rel_err(softmax_attention_tiled(q, k, v, block), ref), 1e-12);
        // fp32: both accumulate in fp32 in different orders; ~1e-6 per element.
        auto yf = softmax_attention_tiled(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat), block);
        EXPECT_EQ(yf.scalar_type(), at::kFloat);
        EXPECT_LT(rel_err(yf, ref), 2e-5);
      }
}

TEST(Softmax, Bf16InputComputesInFp32) {
  auto q = randn({1, 2, 40, 16}, 1), k = randn({1, 1, 40, 16}, 2), v = randn({1, 1, 40, 16}, 3);
  auto qb = q.to(at::kBFloat16), kb = k.to(at::kBFloat16), vb = v.to(at::kBFloat16);
  auto y = softmax_attention_tiled(qb, kb, vb, 16);
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  // Reference on the same bf16-rounded inputs in fp64; the output rounding to bf16
  // (8 mantissa bits, 2^-9 relative) dominates.
  auto ref = softmax_attention_naive(qb.to(at::kDouble), kb.to(at::kDouble), vb.to(at::kDouble));
  EXPECT_LT(rel_err(y, ref), 5e-3);
}

TEST(Softmax, CachedKeysOffsetTheCausalMask) {
  // Queries that are the last T of S positions equal the tail of the full evaluation.
  auto q = randn({1, 4, 50, 8}, 4), k = randn({1, 2, 50, 8}, 5), v = randn({1, 2, 50, 8}, 6);
  auto full = softmax_attention_naive(q, k, v);
  auto tail_q = q.narrow(2, 37, 13);
  EXPECT_LT(rel_err(softmax_attention_naive(tail_q, k, v), full.narrow(2, 37, 13)), 1e-13);
  EXPECT_LT(rel_err(softmax_attention_tiled(tail_q, k, v, 8), full.narrow(2, 37, 13)), 1e-13);
}

TEST(Softmax, GradientsFlowThroughTiled) {
  auto q = randn({1, 2, 20, 8}, 7).set_requires_grad(true);
  auto k = randn({1, 1, 20, 8}, 8).set_requires_grad(true);
  auto v = randn({1, 1, 20, 8}, 9).set_requires_grad(true);
  auto w = randn({1, 2, 20, 8}, 10);
  (softmax_attention_naive(q, k, v) * w).sum().backward();
  auto gq = q.grad().clone(), gk = k.grad().clone(), gv = v.grad().clone();
  q.grad().zero_(); k.grad().zero_(); v.grad().zero_();
  (softmax_attention_tiled(q, k, v, 6) * w).sum().backward();
  EXPECT_LT(rel_err(q.grad(), gq), 1e-12);
  EXPECT_LT(rel_err(k.grad(), gk), 1e-12);
  EXPECT_LT(rel_err(v.grad(), gv), 1e-12);
}

TEST(SoftmaxMethod, DecodeEqualsFullForward) {
  SoftmaxAttention m(16);
  EXPECT_EQ(m.name(), "softmax");
  EXPECT_TRUE(m.parameters().empty());
  auto q = randn({2, 6, 70, 16}, 11), k = randn({2, 3, 70, 16}, 12), v = randn({2, 3, 70, 8}, 13);
  auto full = m.forward(q, k, v);
  auto st = m.new_state(2);
  EXPECT_EQ(st->state_bytes(), 0);
  // A prefill of 33, then 30 single tokens, then a block of 7.
  std::vector<at::Tensor> parts{st->extend(q.narrow(2, 0, 33), k.narrow(2, 0, 33), v.narrow(2, 0, 33))};
  int64_t bytes_after_prefill = st->state_bytes();
  EXPECT_EQ(bytes_after_prefill, 33 * 2 * 3 * (16 + 8) * 8);
  for (int64_t t = 33; t < 63; ++t)
    parts.push_back(st->step(q.select(2, t), k.select(2, t), v.select(2, t)).unsqueeze(2));
  parts.push_back(st->extend(q.narrow(2, 63, 7), k.narrow(2, 63, 7), v.narrow(2, 63, 7)));
  EXPECT_EQ(st->tokens(), 70);
  EXPECT_GT(st->state_bytes(), bytes_after_prefill);
  EXPECT_LT(rel_err(at::cat(parts, 2), full), 1e-12);
}

TEST(SoftmaxErrors, BadInputNamesTheOperation) {
  auto q = randn({1, 4, 8, 8}, 1), k = randn({1, 2, 8, 8}, 2), v = randn({1, 2, 8, 8}, 3);
  auto expect_error = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "expected oal::Error containing " << needle;
    } catch (const oal::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { softmax_attention_naive(q, randn({1, 3, 8, 8}, 4), randn({1, 3, 8, 8}, 5)); },
               "[softmax_attention_naive]");
  expect_error([&] { softmax_attention_tiled(q, k, randn({1, 2, 7, 8}, 5)); },
               "[softmax_attention_tiled]");
  expect_error([&] { softmax_attention_tiled(q, randn({1, 2, 8, 4}, 5), v); }, "head dims");
  auto qn = q.clone();
  qn[0][0][3][1] = std::nan("");
  expect_error([&] { softmax_attention_tiled(qn, k, v); }, "NaN");
  expect_error([&] { softmax_attention_tiled(q, k, v, 0); }, "block");
  expect_error([&] { softmax_attention_naive(q.narrow(2, 0, 1).squeeze(2), k, v); }, "dimensions");
  SoftmaxAttention m;
  auto st = m.new_state(1);
  st->extend(q, k, v);
  expect_error([&] { st->extend(q, randn({1, 2, 8, 16}, 6), v); }, "[softmax_kv_cache]");
}

}  // namespace
}  // namespace oal::attn
