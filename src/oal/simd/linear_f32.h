#pragma once
// A model projection y = x Wᵀ + b on the CPU (the q/k/v/o, MLP and lm_head layers):
// multi-threaded, through the faster backend of this machine.
#include <cstdint>

namespace oal::simd {

// y[M, N] = x[M, K] · w[N, K]ᵀ (+ bias[N] when non-null); fp32, rows contiguous
// (strides K, K and N). M, N, K >= 1; threads 0 = ATen's count.
// M <= 8 (decoding): a streaming pass over w (each row read once, dotted with every x
// row), which is what bounds a decode step. Larger M: the own micro-kernel on packed
// panels of wᵀ spread over the threads, or one multi-threaded cblas_sgemm, as
// big_gemm_backend() (gemm_choice.h) measured faster here; policy own/blas forces one.
void linear_f32(int64_t M, int64_t N, int64_t K, const float* x, const float* w,
                const float* bias, float* y, int threads = 0);

// Whether linear_f32 runs products of more than 8 rows as one multi-threaded BLAS call
// (the policy, or the measured rule) rather than on ATen's threads.
bool linear_f32_on_blas();

}  // namespace oal::simd
