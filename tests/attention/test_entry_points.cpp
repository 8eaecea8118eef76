// The attention entry points as dispatch points: which storage and path they take, that
// the cached OAL plan follows L, and that priming (absorb) and mid-stream fallbacks give
// the same answers as the references. Numeric agreement across shapes, dtypes and SIMD
// targets lives in test_op_consistency.cpp.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/references.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/simd_path.h"
#include "oal/attention/softmax/softmax.h"
#include "oal/attention/softmax/softmax_method.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

// fp32 kernel vs fp32/fp64 reference on unit-scale inputs: summation order only (~1e-6
// relative measured); 2e-5 still catches an off-by-one key or a wrong head (O(1) errors).
constexpr double kTol = 2e-5;

// fp32 inputs: what the kernels take (the premise of every kernel-path test here).
at::Tensor f32(std::vector<int64_t> shape, uint64_t seed) {
  return randn(std::move(shape), seed, 1.0, at::kFloat);
}

TEST(KvCache, KernelStorageAttendsLikeTheNaiveReference) {
  SoftmaxAttention method;
  auto q = f32({2, 6, 40, 16}, 1), k = f32({2, 2, 40, 16}, 2), v = f32({2, 2, 40, 8}, 3);
  auto cache_state = method.new_state(2);
  auto& cache = dynamic_cast<SoftmaxKvCache&>(*cache_state);
  // Prime with 25 tokens (no attention), then decode the rest one by one.
  cache.absorb(q.narrow(2, 0, 25), k.narrow(2, 0, 25), v.narrow(2, 0, 25));
  EXPECT_TRUE(cache.simd_storage());
  EXPECT_EQ(cache.tokens(), 25);
  const auto ref = softmax_attention_naive(q, k, v);
  for (int64_t t = 25; t < 40; ++t) {
    auto y = cache.step(q.select(2, t), k.select(2, t), v.select(2, t));
    EXPECT_LT(rel_err(y, ref.select(2, t)), kTol) << t;
  }
  EXPECT_EQ(cache.state_bytes(), 40 * 2 * 2 * (16 + 8) * 4);
  EXPECT_LT(rel_err(cache.keys(), k), 1e-7) << "Kᵀ storage reads back as K";
}

TEST(KvCache, F16StorageHalvesTheBytesAndSnapshotsRestoreIntoIt) {
  SoftmaxAttention method(SoftmaxAttention::k_default_block, std::nullopt, KvCacheType::f16);
  auto q = f32({1, 4, 30, 16}, 11), k = f32({1, 2, 30, 16}, 12), v = f32({1, 2, 30, 8}, 13);
  auto state = method.new_state(1);
  auto& cache = dynamic_cast<SoftmaxKvCache&>(*state);
  const at::Tensor y = cache.extend(q.narrow(2, 0, 20), k.narrow(2, 0, 20), v.narrow(2, 0, 20));
  EXPECT_TRUE(cache.simd_storage());
  EXPECT_EQ(cache.keys().scalar_type(), at::kHalf);
  EXPECT_EQ(cache.state_bytes(), 20 * 2 * (16 + 8) * 2) << "2 bytes per cached element";
  EXPECT_TRUE(at::equal(cache.keys(), k.narrow(2, 0, 20).to(at::kHalf)));
  // A restored copy continues exactly as the original: same storage, same numbers.
  auto copy = method.new_state(1);
  copy->restore(cache.snapshot());
  EXPECT_TRUE(dynamic_cast<SoftmaxKvCache&>(*copy).simd_storage());
  EXPECT_EQ(copy->state_bytes(), cache.state_bytes());
  const auto rest = [&](DecodeState& s) {
    return s.extend(q.narrow(2, 20, 10), k.narrow(2, 20, 10), v.narrow(2, 20, 10));
  };
  EXPECT_TRUE(at::equal(rest(*copy), rest(cache)));
  EXPECT_EQ(y.scalar_type(), at::kFloat);
}

TEST(KvCache, CacheTypeNamesParseAndUnknownOnesAreRefused) {
  EXPECT_EQ(parse_kv_cache_type("f16"), KvCacheType::f16);
  EXPECT_EQ(parse_kv_cache_type("q8_0"), KvCacheType::q8_0);
  EXPECT_EQ(kv_cache_type_name(parse_kv_cache_type("f32")), "f32");
  EXPECT_EQ(kv_cache_type_name(KvCacheType::q8_0), "q8_0");
  try {
    parse_kv_cache_type("q4");
    FAIL() << "q4 is not a cache type";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected f32, f16 or q8_0"), std::string::npos) << e.what();
  }
}

TEST(KvCache, AutogradMidStreamFallsBackToTheReference) {
  SoftmaxAttention method;
  auto q = f32({1, 2, 12, 8}, 4), k = f32({1, 1, 12, 8}, 5), v = f32({1, 1, 12, 8}, 6);
  auto cache = method.new_state(1);
  cache->extend(q.narrow(2, 0, 10), k.narrow(2, 0, 10), v.narrow(2, 0, 10));
  auto qg = q.narrow(2, 10, 2).clone().set_requires_grad(true);
  auto y = cache->extend(qg, k.narrow(2, 10, 2), v.narrow(2, 10, 2));
  EXPECT_LT(rel_err(y.detach(), softmax_attention_naive(q, k, v).narrow(2, 10, 2)), kTol);
  y.sum().backward();
  ASSERT_TRUE(qg.grad().defined()) << "the reference path keeps autograd";
}

TEST(KvCache, Fp64KeepsTensorStorage) {
  SoftmaxAttention method;
  auto q = randn({1, 2, 9, 8}, 7, 1.0, at::kDouble), k = randn({1, 1, 9, 8}, 8, 1.0, at::kDouble);
  auto v = randn({1, 1, 9, 8}, 9, 1.0, at::kDouble);
  auto state = method.new_state(1);
  auto y = state->extend(q, k, v);
  EXPECT_FALSE(dynamic_cast<SoftmaxKvCache&>(*state).simd_storage());
  EXPECT_EQ(y.scalar_type(), at::kDouble);
  EXPECT_LT(rel_err(y, softmax_attention_naive(q, k, v)), 1e-12);
}

TEST(EntryPoints, FlashRefusesWhatItCannotTakeAndPathsSayWhy) {
  auto q = randn({1, 2, 5, 8}, 10, 1.0, at::kDouble);
  oal::test::expect_error([&] { softmax_attention_flash(q, q.narrow(1, 0, 1), q.narrow(1, 0, 1)); },
                          {"softmax_attention_flash", "fp32 or bf16"});
  EXPECT_EQ(simd_path(simd_blocker(q, q, q)).rfind("reference (dtype", 0), 0u);
  auto f = q.to(at::kFloat);
  EXPECT_EQ(simd_path(simd_blocker(f, f, f)).rfind("simd (", 0), 0u);
}

TEST(OalPlanCache, RebuildsWhenLChangesAndOnlyThen) {
  auto m = QuadraticAttention::from_kernels(oal::test::random_kernels(4, 8, 2, 3), {}, false,
                                            at::kFloat);
  auto q = f32({1, 4, 20, 8}, 11), k = f32({1, 2, 20, 8}, 12), v = f32({1, 2, 20, 8}, 13);
  const auto& cache = m.options().plan_cache;
  ASSERT_TRUE(cache);
  ASSERT_EQ(simd_blocker(q, k, v), "");
  auto y0 = m.forward(q, k, v);
  const auto plan0 = cache->get(m.kernels());
  EXPECT_EQ(cache->get(m.kernels()).get(), plan0.get()) << "unchanged kernels reuse the plan";
  EXPECT_LT(rel_err(y0, hd_pairwise(q, k, v, m.kernels())), kTol);
  {  // An in-place update of L (what an optimizer step does) must reach the kernels.
    c10::NoGradGuard ng;
    m.kernels().L.narrow(1, 1, 1).add_(0.8);  // row 1 of every head's L (a scale would cancel)
  }
  auto y1 = m.forward(q, k, v);
  EXPECT_NE(cache->get(m.kernels()).get(), plan0.get());
  EXPECT_LT(rel_err(y1, hd_pairwise(q, k, v, m.kernels())), kTol);
  EXPECT_GT(rel_err(y1, y0), 1e-2) << "the new L changes the outputs";
}

TEST(HdDecode, AbsorbThenStepsMatchTheRecurrentReference) {
  const auto lk = LayerKernels::from(oal::test::random_kernels(6, 8, 3, 5), at::kFloat);
  auto q = f32({2, 6, 30, 8}, 14), k = f32({2, 2, 30, 8}, 15), v = f32({2, 2, 30, 4}, 16);
  HdDecodeState dec(lk, 2);
  dec.absorb(q.narrow(2, 0, 20), k.narrow(2, 0, 20), v.narrow(2, 0, 20));
  EXPECT_EQ(dec.tokens(), 20);
  const int64_t bytes = dec.state_bytes();
  const auto ref = hd_recurrent(q, k, v, lk);
  for (int64_t t = 20; t < 30; ++t)
    EXPECT_LT(rel_err(dec.step(q.select(2, t), k.select(2, t), v.select(2, t)), ref.select(2, t)),
              kTol)
        << t;
  EXPECT_EQ(dec.state_bytes(), bytes) << "constant-size state";
}

TEST(HdDispatch, BlockerNamesWhyTheKernelCannotRun) {
  auto lk = LayerKernels::from(oal::test::random_kernels(2, 4, 2, 3), at::kFloat);
  auto q = randn({1, 2, 5, 4}, 1, 0.5, at::kFloat), k = randn({1, 1, 5, 4}, 2, 0.5, at::kFloat);
  auto v = randn({1, 1, 5, 3}, 3, 1.0, at::kFloat);
  auto st = HdState::zeros(1, 1, 4, 3);
  EXPECT_EQ(hd_simd_blocker(q, k, v, lk, st, {}), "");
  EXPECT_NE(hd_simd_blocker(q, k, v, lk, st, HdOptions{.chunk = 64, .backend = HdBackend::aten}).find("ATen"),
            std::string::npos);
  auto st64 = HdState::zeros(1, 1, 4, 3, at::kDouble);
  EXPECT_NE(hd_simd_blocker(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), lk,
                              st64, {})
                .find("dtype"),
            std::string::npos);
  auto qg = q.clone().set_requires_grad(true);
  EXPECT_NE(hd_simd_blocker(qg, k, v, lk, st, {}).find("autograd"), std::string::npos);
  {
    c10::NoGradGuard no_grad;  // inference on a trainable input: the kernel may run
    EXPECT_EQ(hd_simd_blocker(qg, k, v, lk, st, {}), "");
  }
  // Gradients still flow through the automatic backend (it takes the ATen path).
  auto y = hd_chunked(qg, k, v, lk).y;
  y.sum().backward();
  ASSERT_TRUE(qg.grad().defined());
  EXPECT_GT(qg.grad().abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace oal::attn
