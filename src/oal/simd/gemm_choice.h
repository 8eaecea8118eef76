#pragma once
// Which GEMM backend gemm_f32 runs for a shape: the kernels' own micro-kernel or BLAS.
#include <cstdint>
#include <string_view>

namespace oal::simd {

enum class GemmBackend { own, blas };
// automatic = the measured rule below; own / blas force one backend (tests, benchmarks,
// OAL_GEMM=own|blas|auto).
enum class GemmPolicy { automatic, own, blas };

GemmPolicy gemm_policy();
// Returns the previous policy. Not thread-safe with respect to running kernels.
GemmPolicy set_gemm_policy(GemmPolicy policy);
// Applies OAL_GEMM (own, blas, auto or unset); throws oal::Error("gemm") on other values.
void apply_gemm_env();
std::string_view gemm_backend_name(GemmBackend backend);

// The backend for C[M, N] (+)= A[M, K] B[K, N] with A strides (a_rs, a_cs) under the
// current policy and SIMD target. Rule (automatic): thin or small products (any of M, N,
// K below 256: every GEMM inside the attention kernels) run the own micro-kernel, which
// measured 2-6x faster than OpenBLAS there on both targets; big products run whichever
// big_gemm_backend() measured faster on this machine.
GemmBackend gemm_choice(int64_t M, int64_t N, int64_t K, int64_t a_rs, int64_t a_cs);

// The faster backend for big products (the model's projections), measured once per SIMD
// target in this process: a 384³ fp32 product on one thread, best of 3 per backend
// (~10 ms). OpenBLAS may run narrower kernels than the CPU has (0.3.21 runs its SSE3
// "Prescott" kernels on CPUs it does not know), so neither backend wins everywhere.
GemmBackend big_gemm_backend();

}  // namespace oal::simd
