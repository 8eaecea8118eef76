// hd_chunked / hd_extend / HdDecodeState dispatch to the CPU kernels (backend automatic)
// and must agree with the differentiable ATen path (backend aten) on the same inputs;
// SoftmaxAttention dispatches to the flash-style kernel and must agree with the tiled
// reference. Inputs the kernels cannot take (fp64, autograd) stay on the ATen path.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "oal/attention/hd.h"
#include "oal/attention/quadratic.h"
#include "oal/attention/softmax.h"
#include "oal/attention/softmax_method.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

struct Case {
  int64_t batch, hq, hkv, d, dv, T, chunk;
};

HdOptions with(HdBackend b, int64_t chunk) {
  HdOptions o;
  o.backend = b;
  o.chunk = chunk;
  return o;
}

// Tolerance: both paths compute in fp32 from the same fp32 inputs but sum in different
// orders (blocked GEMMs vs ATen matmuls), and the state readout is the expanded form;
// on unit-scale inputs with eps 1e-3 the relative difference measured ~1e-6, 2e-5 bounds
// it with margin while still catching any wrong chunk boundary or group (those are O(1)).
constexpr double kFp32Tol = 2e-5;

TEST(HdDispatch, AutomaticMatchesAtenAcrossShapes) {
  const Case cases[] = {{1, 1, 1, 4, 2, 1, 64},   {1, 2, 1, 8, 8, 65, 16},
                        {2, 4, 2, 16, 8, 100, 32}, {1, 14, 2, 64, 64, 130, 64},
                        {1, 6, 3, 8, 5, 37, 7}};
  uint64_t seed = 1;
  for (const auto& c : cases) {
    auto lk = LayerKernels::from(oal::test::random_kernels(c.hq, c.d, 3, seed), at::kFloat);
    auto q = randn({c.batch, c.hq, c.T, c.d}, seed + 1, 0.5, at::kFloat);
    auto k = randn({c.batch, c.hkv, c.T, c.d}, seed + 2, 0.5, at::kFloat);
    auto v = randn({c.batch, c.hkv, c.T, c.dv}, seed + 3, 1.0, at::kFloat);
    auto fast = hd_chunked(q, k, v, lk, with(HdBackend::automatic, c.chunk));
    auto ref = hd_chunked(q, k, v, lk, with(HdBackend::aten, c.chunk));
    EXPECT_LT(rel_err(fast.y, ref.y), kFp32Tol) << "T " << c.T << " hq " << c.hq;
    EXPECT_LT(rel_err(fast.state.S, ref.state.S), kFp32Tol);
    EXPECT_EQ(fast.state.tokens, c.T);
    // Continuing the state: a second prefill after the first (inter-chunk readout).
    auto fast2 = hd_chunked(q, k, v, lk, with(HdBackend::automatic, c.chunk), &fast.state);
    auto ref2 = hd_chunked(q, k, v, lk, with(HdBackend::aten, c.chunk), &ref.state);
    EXPECT_LT(rel_err(fast2.y, ref2.y), kFp32Tol) << "continued, T " << c.T;
    EXPECT_EQ(fast2.state.tokens, 2 * c.T);
    seed += 10;
  }
}

TEST(HdDispatch, Bf16InputsThroughTheKernel) {
  auto lk = LayerKernels::from(oal::test::random_kernels(4, 16, 3, 7), at::kFloat);
  auto q = randn({1, 4, 50, 16}, 8, 0.5, at::kBFloat16);
  auto k = randn({1, 2, 50, 16}, 9, 0.5, at::kBFloat16);
  auto v = randn({1, 2, 50, 8}, 10, 1.0, at::kBFloat16);
  auto fast = hd_chunked(q, k, v, lk, with(HdBackend::automatic, 16));
  auto ref = hd_chunked(q, k, v, lk, with(HdBackend::aten, 16));
  EXPECT_EQ(fast.y.scalar_type(), at::kBFloat16);
  EXPECT_EQ(fast.state.S.scalar_type(), at::kFloat);
  // Same bf16 inputs widened to fp32 on both paths; the outputs differ by at most the
  // final rounding to bf16 (2^-8 relative).
  EXPECT_LT(rel_err(fast.y, ref.y), 8e-3);
  EXPECT_LT(rel_err(fast.state.S, ref.state.S), kFp32Tol);
}

TEST(HdDispatch, DecodeStepsMatchAtenDecode) {
  auto lk = LayerKernels::from(oal::test::random_kernels(6, 8, 3, 21), at::kFloat);
  const int64_t T = 40;
  auto q = randn({2, 6, T, 8}, 22, 0.5, at::kFloat);
  auto k = randn({2, 3, T, 8}, 23, 0.5, at::kFloat);
  auto v = randn({2, 3, T, 4}, 24, 1.0, at::kFloat);
  HdDecodeState fast(lk, 2, with(HdBackend::automatic, 16));
  HdDecodeState ref(lk, 2, with(HdBackend::aten, 16));
  // A 10-token prefill, then single tokens (the fused decode kernel), then 3 at once.
  auto run = [&](HdDecodeState& s) {
    std::vector<at::Tensor> ys{s.extend(q.narrow(2, 0, 10), k.narrow(2, 0, 10), v.narrow(2, 0, 10))};
    for (int64_t t = 10; t < T - 3; ++t)
      ys.push_back(s.extend(q.narrow(2, t, 1), k.narrow(2, t, 1), v.narrow(2, t, 1)));
    ys.push_back(s.extend(q.narrow(2, T - 3, 3), k.narrow(2, T - 3, 3), v.narrow(2, T - 3, 3)));
    return at::cat(ys, 2);
  };
  auto yf = run(fast), yr = run(ref);
  EXPECT_LT(rel_err(yf, yr), kFp32Tol);
  EXPECT_LT(rel_err(fast.state()->S, ref.state()->S), kFp32Tol);
  EXPECT_EQ(fast.tokens(), T);
  EXPECT_EQ(fast.state_bytes(), ref.state_bytes());
  // And both equal the whole-sequence prefill.
  EXPECT_LT(rel_err(yf, hd_chunked(q, k, v, lk, with(HdBackend::aten, 16)).y), kFp32Tol);
}

TEST(HdDispatch, BlockerNamesWhyTheKernelCannotRun) {
  auto lk = LayerKernels::from(oal::test::random_kernels(2, 4, 2, 3), at::kFloat);
  auto q = randn({1, 2, 5, 4}, 1, 0.5, at::kFloat), k = randn({1, 1, 5, 4}, 2, 0.5, at::kFloat);
  auto v = randn({1, 1, 5, 3}, 3, 1.0, at::kFloat);
  auto st = HdState::zeros(1, 1, 4, 3);
  EXPECT_EQ(hd_kernel_blocker(q, k, v, lk, st, {}), "");
  EXPECT_NE(hd_kernel_blocker(q, k, v, lk, st, with(HdBackend::aten, 64)).find("ATen"),
            std::string::npos);
  auto st64 = HdState::zeros(1, 1, 4, 3, at::kDouble);
  EXPECT_NE(hd_kernel_blocker(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), lk,
                              st64, {})
                .find("dtype"),
            std::string::npos);
  auto qg = q.clone().set_requires_grad(true);
  EXPECT_NE(hd_kernel_blocker(qg, k, v, lk, st, {}).find("autograd"), std::string::npos);
  {
    c10::NoGradGuard no_grad;  // inference on a trainable input: the kernel may run
    EXPECT_EQ(hd_kernel_blocker(qg, k, v, lk, st, {}), "");
  }
  // Gradients still flow through the automatic backend (it takes the ATen path).
  auto y = hd_chunked(qg, k, v, lk).y;
  y.sum().backward();
  ASSERT_TRUE(qg.grad().defined());
  EXPECT_GT(qg.grad().abs().sum().item<double>(), 0.0);
}

TEST(SoftmaxDispatch, MethodMatchesTiledReference) {
  SoftmaxAttention method(32);
  for (auto dt : {at::kFloat, at::kBFloat16}) {
    auto q = randn({1, 4, 70, 16}, 31, 1.0, dt), k = randn({1, 2, 70, 16}, 32, 1.0, dt);
    auto v = randn({1, 2, 70, 8}, 33, 1.0, dt);
    auto y = method.forward(q, k, v);
    EXPECT_EQ(y.scalar_type(), dt);
    // fp32 online softmax vs fp32 tiled softmax: summation order only (~1e-7 relative);
    // bf16 adds the output rounding (2^-8).
    EXPECT_LT(rel_err(y, softmax_attention_tiled(q, k, v, 32)), dt == at::kFloat ? 1e-5 : 8e-3);
    // The KV cache computes the same thing token by token.
    auto cache = method.new_state(1);
    std::vector<at::Tensor> ys{cache->extend(q.narrow(2, 0, 30), k.narrow(2, 0, 30), v.narrow(2, 0, 30))};
    for (int64_t t = 30; t < 70; ++t)
      ys.push_back(cache->extend(q.narrow(2, t, 1), k.narrow(2, t, 1), v.narrow(2, t, 1)));
    EXPECT_LT(rel_err(at::cat(ys, 2), y), dt == at::kFloat ? 1e-5 : 8e-3);
  }
}

}  // namespace
}  // namespace oal::attn
