#include "oal/kernels/cpu/gemm_choice.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "oal/core/error.h"
#include "oal/kernels/cpu/gemm_f32.h"

namespace oal::kernels::cpu {
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

std::string_view gemm_backend_name(GemmBackend b) { return b == GemmBackend::blas ? "blas" : "own"; }

GemmBackend gemm_choice(int64_t M, int64_t N, int64_t K, int64_t a_rs, int64_t a_cs) {
  const GemmPolicy p = gemm_policy();
  if (p == GemmPolicy::own) return GemmBackend::own;
  const bool blas_ok = blas_available() && (a_rs == 1 || a_cs == 1);
  if (p == GemmPolicy::blas) return blas_ok ? GemmBackend::blas : GemmBackend::own;
  // Measured rule: TODO after measurement.
  return GemmBackend::own;
}

}  // namespace oal::kernels::cpu
