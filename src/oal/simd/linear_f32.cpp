// Model projections (y = x Wᵀ + b), compiled once per SIMD target (Highway
// foreach_target) for the streaming decode pass; big products reuse gemm_f32_own.
#include "oal/simd/simd_config.h"
// (simd_config.h first: it selects the targets foreach_target.h compiles.)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "oal/simd/linear_f32.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>

#include "oal/simd/simd_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace oal::simd::HWY_NAMESPACE {

// Rows [n0, n1) of y[m, :] = x[m] · w[n]ᵀ for m < M <= 8: each w row is loaded once and
// dotted with every x row (x stays in L1), so the pass streams w at memory speed.
void linear_rows(int64_t M, int64_t N, int64_t K, const float* x, const float* w,
                 const float* bias, float* y, int64_t n0, int64_t n1) {
  const DF d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t n = n0; n < n1; ++n) {
    const float* wn = w + n * K;
    VF acc[8];
    for (int64_t m = 0; m < M; ++m) acc[m] = hn::Zero(d);
    for (int64_t k = 0; k < K; k += L) {
      const VF wv = load_n(d, wn + k, K - k);
      for (int64_t m = 0; m < M; ++m)
        acc[m] = hn::MulAdd(wv, load_n(d, x + m * K + k, K - k), acc[m]);
    }
    const float b = bias != nullptr ? bias[n] : 0.0f;
    for (int64_t m = 0; m < M; ++m) y[m * N + n] = hn::GetLane(hn::SumOfLanes(d, acc[m])) + b;
  }
}

}  // namespace oal::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <vector>

#include "oal/core/error.h"
#include "oal/simd/gemm_choice.h"
#include "oal/simd/gemm_f32.h"
#include "oal/simd/linear_f32.h"
#include "oal/simd/parallel.h"

namespace oal::simd {
HWY_EXPORT(linear_rows);

namespace {

constexpr int64_t k_panel_n = 128;  // columns of y per work item (wᵀ panel width)
constexpr int64_t k_panel_k = 256;  // K per packed panel: 256 x 128 fp32 = 128 KiB (L2)
constexpr int64_t k_block_m = 512;  // rows of x per work item

// The own micro-kernel over items (N panel, M block); each packs its wᵀ panel per K
// slice and reuses it for all rows of its block.
void linear_own(int64_t M, int64_t N, int64_t K, const float* x, const float* w,
                const float* bias, float* y, int threads) {
  const int64_t n_panels = (N + k_panel_n - 1) / k_panel_n;
  const int64_t m_blocks = (M + k_block_m - 1) / k_block_m;
  std::vector<std::vector<float>> packed(
      static_cast<size_t>(worker_count(n_panels * m_blocks, threads)));
  parallel_items(n_panels * m_blocks, threads, [&](int64_t worker, int64_t item) {
    const int64_t n0 = (item % n_panels) * k_panel_n, pw = std::min(k_panel_n, N - n0);
    const int64_t m0 = (item / n_panels) * k_block_m, mb = std::min(k_block_m, M - m0);
    std::vector<float>& bp = packed[static_cast<size_t>(worker)];
    bp.resize(static_cast<size_t>(k_panel_k * k_panel_n));
    float* yb = y + m0 * N + n0;
    for (int64_t m = 0; m < mb; ++m)
      for (int64_t j = 0; j < pw; ++j) yb[m * N + j] = bias != nullptr ? bias[n0 + j] : 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += k_panel_k) {
      const int64_t kc = std::min(k_panel_k, K - k0);
      // bp[k, j] = w[n0 + j, k0 + k], written in order: each of the pw source lines is
      // fetched once and serves 16 consecutive k from L1.
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = 0; j < pw; ++j) bp[k * pw + j] = w[(n0 + j) * K + k0 + k];
      gemm_f32_own(mb, pw, kc, x + m0 * K + k0, K, 1, bp.data(), pw, yb, N, true);
    }
  });
}

void linear_blas(int64_t M, int64_t N, int64_t K, const float* x, const float* w,
                 const float* bias, float* y) {
  blas_sgemm(false, true, M, N, K, x, K, w, K, 0.0f, y, N);  // y = x wᵀ
  if (bias != nullptr)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) y[m * N + n] += bias[n];
}

}  // namespace

bool linear_f32_on_blas() {
  const GemmPolicy p = gemm_policy();
  return p == GemmPolicy::blas ||
         (p == GemmPolicy::automatic && big_gemm_backend() == GemmBackend::blas);
}

void linear_f32(int64_t M, int64_t N, int64_t K, const float* x, const float* w,
                const float* bias, float* y, int threads) {
  check(M >= 1 && N >= 1 && K >= 1, "linear_f32", "expected positive sizes, got M={} N={} K={}",
        M, N, K);
  if (M <= 8) {
    constexpr int64_t rows = 64;  // w rows per work item
    parallel_items((N + rows - 1) / rows, threads, [&](int64_t, int64_t i) {
      HWY_DYNAMIC_DISPATCH(linear_rows)(M, N, K, x, w, bias, y, i * rows,
                                        std::min(N, (i + 1) * rows));
    });
    return;
  }
  if (linear_f32_on_blas())
    linear_blas(M, N, K, x, w, bias, y);
  else
    linear_own(M, N, K, x, w, bias, y, threads);
}

}  // namespace oal::simd
#endif  // HWY_ONCE
