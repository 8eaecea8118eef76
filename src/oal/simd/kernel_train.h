#pragma once
// Training kernels of the kernel-attention layers on the CPU: plain OAL or the learned
// global kernel (no window), windowed OAL and windowed-only attention
// (attention/windowed/window.h has the formula). Forward and backward run by blocks of
// query rows against every key they see, the way flash attention trains softmax: the
// backward recomputes each block's weights, so memory is O(N) per head at any length and
// no [N, N] tensor exists. Time is O(N² d), like softmax's; the chunked-state form
// (attention/oal/chunked_attention.h) is the linear-time one, but its d²/2-wide features cost more
// per token than these pairwise blocks up to a few thousand tokens (docs/operator.md).
//
// Per query head h: a partition g(r) of the d dimensions into G_h groups, L_h lower
// triangular [n, n] (n >= G_h + 1; rows and columns past G_h unused), eps > 0, c_h:
//   s_g = Σ_{r in g} q_r k_r / √d,  s = Σ_g s_g,  s̄ = [1, s_0, ..., s_{G-1}]
//   z_c = Σ_{r >= c} L[r][c] s̄_r,  κ = eps + Σ_c z_c²                     (quadratic.h)
// Query i gives key j <= i the weight exp(s − c_h) when j < S or i − j < W (exact), κ
// otherwise when the layer has a kernel, else 0; y_i = Σ_j w_ij v_j / Σ_j w_ij. S = W = 0
// is the plain kernel method. Each row's weights are shifted by ρ = max(m − c_h, 0)
// (m: its largest exact score; m − c_h without a kernel part), so no exp overflows.
//
// fp32, contiguous: q [B, Hq, N, d], k [B, Hkv, N, d], v [B, Hkv, N, Dv]. Work items are
// spread over ATen's threads; products run on gemm_f32 (BLAS held to one thread by the
// caller).
#include <cstdint>

namespace oal::simd {

struct KernelTrainDims {
  int64_t batch = 1, q_heads = 1, kv_heads = 1, dim = 1, value_dim = 1, len = 0;
  int64_t sinks = 0, recent = 0;  // S and W
  bool kernel = true;             // false: windowed-only (needs W >= 1)
};

struct KernelTrainParams {
  const int64_t* group_of = nullptr;  // [Hq, d] group 0..G_h-1 of each dimension (kernel)
  const int64_t* groups = nullptr;    // [Hq] G_h (kernel)
  const float* L = nullptr;           // [Hq, n, n] lower triangular (kernel)
  int64_t n = 1;
  float eps = 1e-6f;
  const float* log_scale = nullptr;   // [Hq] c_h
};

// Most groups per head the kernel takes (its per-key passes keep one vector per group).
inline constexpr int64_t k_kernel_train_max_groups = 16;

// Query rows per block.
inline constexpr int64_t k_kernel_train_block = 64;

// y [B, Hq, N, Dv]. Throws oal::Error("kernel_train") on inconsistent sizes or a row whose
// weights sum to zero or overflow.
void kernel_train_forward_f32(const KernelTrainDims& dims, const KernelTrainParams& params,
                              const float* q, const float* k, const float* v, float* y);

// The backward splits each head's query blocks into this many parts (work items that
// balance over the threads), each with its own key-side gradient slot until the end.
inline constexpr int64_t k_kernel_train_parts = 2;

// Gradients for the output gradient dy [B, Hq, N, Dv]: dq [B, Hq, N, d],
// dk [B, Hkv, N, d], dv [B, Hkv, N, Dv], dL [Hq, n, n] (kernel; nullptr without) and
// dc [Hq] (summed over the batch). Every output is overwritten.
void kernel_train_backward_f32(const KernelTrainDims& dims, const KernelTrainParams& params,
                               const float* q, const float* k, const float* v,
                               const float* dy, float* dq, float* dk, float* dv, float* dL,
                               float* dc);

}  // namespace oal::simd
