#pragma once
// The one question every attention entry point asks before it hands tensors to the SIMD
// code (src/oal/simd): can it take them? The entry points ARE the dispatch points
// (SoftmaxAttention / SoftmaxKvCache, hd_extend / HdDecodeState): they run the SIMD path
// when the answer is "" and their differentiable ATen reference otherwise. The answer
// never changes a result beyond fp32 rounding, only its speed. ("Kernel" in this project
// is the paper's κ, quadratic.h; the SIMD code is never called a kernel in identifiers.)
#include <ATen/ATen.h>

#include <string>

namespace oal::attn {

// Why the SIMD code cannot take q, k, v ("" when they can), in words a user can act on:
// a tensor not on the CPU, a dtype other than fp32/bf16, or autograd recording through
// one of them. Method-specific reasons (OAL's L and state) are added by hd_simd_blocker.
std::string simd_blocker(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// Whether autograd is recording through t (defined, grad mode on, t requires grad).
bool records_grad(const at::Tensor& t);

// Which path an op takes for inference inputs (fp32 on the CPU, autograd off), decided
// from what the op holds (its weights, options, cache type) rather than from one call's
// inputs: `oal info` and `oal bench --json` report it (model/fast_paths.h). The per-call
// blockers add only the inputs' own reasons (simd_blocker above).
struct PathChoice {
  bool simd = false;
  std::string detail;  // what runs, e.g. "flash, KV cache f16" or "q4_1 blocks, dequant dot"
  std::string reason;  // why not the SIMD code: a blocker's words ("" when simd)
};
// {blocker.empty(), detail, blocker}: the SIMD code when nothing blocks it.
PathChoice path_choice(std::string detail, std::string blocker);

// What a report prints for an entry point's path: "simd (avx512)" when `blocker` is
// empty (with the SIMD target it runs), else "reference (<blocker>)".
std::string simd_path(const std::string& blocker);

}  // namespace oal::attn
