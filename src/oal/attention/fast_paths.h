#pragma once
// Tensor entry points of the CPU fast kernels (src/oal/kernels/cpu/), each with the
// reference it falls back to. A fallback never changes the answer, only the speed: the
// result carries a one-line notice saying why the kernel did not run (the library never
// prints it; callers may show it). Kernels run for: CPU tensors, fp32 or bf16, no
// gradient being recorded through the inputs (or L), and the shapes noted below.
//
// Shapes as in method.h: q [B, Hq, T, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv] ->
// y [B, Hq, T, Dv] in the input dtype (computed and accumulated in fp32).
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "oal/attention/hd.h"
#include "oal/attention/method.h"
#include "oal/attention/quadratic.h"
#include "oal/kernels/cpu/flash_softmax.h"
#include "oal/kernels/cpu/oal_decode.h"
#include "oal/kernels/cpu/oal_plan.h"
#include "oal/kernels/cpu/oal_prefill.h"

namespace oal::attn {

struct FastResult {
  at::Tensor y;
  std::string notice;  // empty when the fast kernel ran, else why the reference ran
};

// Why the CPU kernels cannot take these inputs ("" when they can): device, dtype,
// autograd. Shape errors are not reasons; they throw in the references' checks.
std::string fast_kernel_blocker(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// Exact causal softmax (S >= T allowed, as softmax.h): the flash-style CPU kernel, or
// softmax_attention_tiled when it cannot run.
FastResult softmax_attention_fast(const at::Tensor& q, const at::Tensor& k,
                                  const at::Tensor& v,
                                  std::optional<double> scale = std::nullopt,
                                  const kernels::cpu::FlashOptions& options = {});

// OAL chunked prefill (S == T) continuing `state` when given: the CPU kernel (state
// updated in place, fp32) or hd_chunked (ATen path) when it cannot run — then `state`
// is replaced by the reference's state. `plan` may be passed to skip re-deriving the
// fp32 coefficients (it must come from the same kernels).
FastResult oal_prefill_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const LayerKernels& kernels, int64_t chunk = 64,
                            HdState* state = nullptr,
                            const kernels::cpu::OalPlan* plan = nullptr,
                            const kernels::cpu::OalPrefillOptions& options = {});

// Constant-size OAL decoder on the CPU kernels: extend() with one token uses the fused
// decode step (no allocation besides the output), with several tokens the chunked
// prefill kernel; inputs the kernels cannot take go through hd_extend on the same state
// (last_notice() says so). State layout and size as HdState (hd.h).
class OalFastDecodeState : public DecodeState {
 public:
  OalFastDecodeState(LayerKernels kernels, int64_t batch, int64_t chunk = 64);
  at::Tensor extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override;
  // One token without allocating: q [B, Hq, D], k [B, Hkv, D], v [B, Hkv, Dv] fp32
  // contiguous, y [B, Hq, Dv] fp32 contiguous preallocated (the benchmark's hot loop).
  void step_into(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& y);
  // Absorbs T tokens without reading out (k [B, Hkv, T, D], v [B, Hkv, T, Dv]; fp32 or
  // bf16 CPU): primes a decoder with a context through the prefill kernel.
  void absorb(const at::Tensor& k, const at::Tensor& v);
  int64_t tokens() const override { return state_ ? state_->tokens : 0; }
  int64_t state_bytes() const override { return state_ ? state_->bytes() : 0; }
  const std::optional<HdState>& state() const { return state_; }
  const std::string& last_notice() const { return notice_; }

 private:
  void ensure_state(int64_t kv_heads, int64_t dim, int64_t value_dim);
  LayerKernels kernels_;
  kernels::cpu::OalPlan plan_;
  int64_t batch_, chunk_;
  std::optional<HdState> state_;
  std::unique_ptr<kernels::cpu::OalDecodeWorkspace> ws_;
  std::string notice_;
};

}  // namespace oal::attn
