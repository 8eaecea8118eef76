#pragma once
// Which GEMM backend gemm_f32 runs for a shape: the kernels' own micro-kernel or BLAS.
#include <cstdint>
#include <string_view>

namespace oal::kernels::cpu {

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
// current policy and SIMD target. See gemm_choice.cpp for the rule and its measurements.
GemmBackend gemm_choice(int64_t M, int64_t N, int64_t K, int64_t a_rs, int64_t a_cs);

}  // namespace oal::kernels::cpu
