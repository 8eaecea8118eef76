#pragma once
// Small fp32 GEMM for the attention kernels' inner loops (called from inside a thread's
// work item, so it never spawns threads itself).
#include <cstdint>

namespace oal::simd {

// C[M, N] = A[M, K] · B[K, N]  (accumulate = false)  or  C += A · B  (accumulate = true).
// fp32, accumulation in fp32.
//   A element (m, k) at a[m * a_rs + k * a_cs]   (so Aᵀ of a row-major matrix is a_rs = 1)
//   B row-major with row stride ldb (>= N), C row-major with row stride ldc (>= N).
// M, N, K >= 0; K == 0 zeroes C (or leaves it when accumulating).
// Runs the backend gemm_choice() picks for this shape: the kernels' own register-tiled
// micro-kernel (Highway, the active SIMD target: 6 x 4 vectors on AVX-512/NEON, 6 x 2
// on AVX2/SSE4) or single-threaded BLAS (cblas_sgemm of the BLAS LibTorch loaded).
void gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs,
              const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);

// The micro-kernel alone, on the active SIMD target.
void gemm_f32_own(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs,
                  const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);
// The micro-kernel with B in IEEE half (binary16 bits): each B vector is widened as it is
// loaded (exact), so a B read once (a decode step over an f16 KV cache) needs no fp32
// copy. Same C and accumulation as gemm_f32; always the own micro-kernel.
void gemm_f32_half_b(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs,
                     int64_t a_cs, const uint16_t* b, int64_t ldb, float* c, int64_t ldc,
                     bool accumulate);
// cblas_sgemm alone (OpenBLAS held to one thread by the caller's context). Requires
// blas_available(); A must have a unit stride in one direction (a_rs == 1 or a_cs == 1).
void gemm_f32_blas(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs,
                   int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                   bool accumulate);
// Whether cblas_sgemm is in the process (looked up at run time, no link dependency).
bool blas_available();
// cblas_sgemm, row-major: C[M, N] = op(A) op(B) + beta C with op = transpose when the
// flag is set (lda/ldb/ldc as in CBLAS). Throws oal::Error("gemm_f32") without BLAS.
void blas_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The plain triple loop (fp32 accumulate in k order): the tests' reference.
void gemm_f32_scalar(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs,
                     int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                     bool accumulate);

}  // namespace oal::simd
