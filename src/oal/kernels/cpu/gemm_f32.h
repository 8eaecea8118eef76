#pragma once
// Small fp32 GEMM for the attention kernels' inner loops (called from inside a thread's
// work item, so it never spawns threads itself — unlike BLAS, which would oversubscribe
// the pool when several workers call it at once).
#include <cstdint>

namespace oal::kernels::cpu {

// C[M, N] = A[M, K] · B[K, N]  (accumulate = false)  or  C += A · B  (accumulate = true).
// fp32, accumulation in fp32.
//   A element (m, k) at a[m * a_rs + k * a_cs]   (so Aᵀ of a row-major matrix is a_rs = 1)
//   B row-major with row stride ldb (>= N), C row-major with row stride ldc (>= N).
// M, N, K >= 0; K == 0 zeroes C (or leaves it when accumulating). Dispatches on
// active_isa(): AVX-512 register-blocked 6x64 tiles with K panels of 128, else a plain
// loop (the reference the tests compare against).
void gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs,
              const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);

// The plain triple loop (fp32 accumulate in k order), whatever the ISA.
void gemm_f32_scalar(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs,
                     int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                     bool accumulate);

}  // namespace oal::kernels::cpu
