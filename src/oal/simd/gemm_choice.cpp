#include "oal/simd/gemm_choice.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <vector>
#include <cstdlib>
#include <string>

#include "oal/core/blas_threads.h"
#include "oal/core/error.h"
#include "oal/simd/gemm_f32.h"
#include "oal/simd/isa.h"

namespace oal::simd {
namespace {

std::atomic<GemmPolicy>& policy() {
  static std::atomic<GemmPolicy> p{GemmPolicy::automatic};
  return p;
}

}  // namespace

GemmPolicy gemm_policy() { return policy().load(std::memory_order_relaxed); }

GemmPolicy set_gemm_policy(GemmPolicy p) {
  check(p != GemmPolicy::blas || blas_available(), "gemm",
        "cannot force BLAS: cblas_sgemm is not loaded in this process");
  return policy().exchange(p);
}

void apply_gemm_env() {
  const char* env = std::getenv("OAL_GEMM");
  if (env == nullptr || *env == '\0') return;
  const std::string v = env;
  if (v == "auto") set_gemm_policy(GemmPolicy::automatic);
  else if (v == "own") set_gemm_policy(GemmPolicy::own);
  else if (v == "blas") set_gemm_policy(GemmPolicy::blas);
  else fail("gemm", "OAL_GEMM='{}': expected own, blas or auto", v);
}

std::string_view gemm_backend_name(GemmBackend b) {
  return b == GemmBackend::blas ? "blas" : "own";
}

GemmBackend big_gemm_backend() {
  if (!blas_available()) return GemmBackend::own;
  static std::mutex mutex;
  static std::map<SimdTarget, GemmBackend> measured;
  std::lock_guard<std::mutex> lock(mutex);
  const SimdTarget target = active_target();
  auto it = measured.find(target);
  if (it != measured.end()) return it->second;
  constexpr int64_t n = 384;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  auto best_ms = [&](auto gemm) {
    double best = 1e30;
    for (int i = 0; i < 4; ++i) {  // the first call warms caches and BLAS buffers
      const auto t0 = std::chrono::steady_clock::now();
      gemm(n, n, n, a.data(), n, 1, b.data(), n, c.data(), n, false);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (i > 0) best = std::min(best, ms);
    }
    return best;
  };
  ScopedSingleThreadBlas one_thread;
  const double own = best_ms(&gemm_f32_own), blas = best_ms(&gemm_f32_blas);
  return measured[target] = blas < own ? GemmBackend::blas : GemmBackend::own;
}

GemmBackend gemm_choice(int64_t M, int64_t N, int64_t K, int64_t a_rs, int64_t a_cs) {
  const GemmPolicy p = gemm_policy();
  if (p == GemmPolicy::own) return GemmBackend::own;
  const bool blas_ok = blas_available() && (a_rs == 1 || a_cs == 1);
  if (p == GemmPolicy::blas) return blas_ok ? GemmBackend::blas : GemmBackend::own;
  // Measured (single thread, GFLOP/s own / BLAS, OpenBLAS 0.3.21 running its Prescott
  // kernels on this Xeon; `oal bench` prints this table on every run):
  //                               AVX-512                AVX2 forced, same CPU
  //   flash 64x64x64                 127 / 19              63 / 19
  //   OAL readout 448x64x2145        106 / 38              65 / 36
  //   OAL update 2145x64x64 (Aᵀ)     120 / 34              61 / 34
  //   1024³                           80 / 38              41 / 49
  // The attention kernels' GEMMs are thin (N = Dv <= 128): BLAS's packing does not pay.
  const bool big = M >= 256 && N >= 256 && K >= 256;
  if (!big || !blas_ok) return GemmBackend::own;
  return big_gemm_backend();
}

}  // namespace oal::simd
