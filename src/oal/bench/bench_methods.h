#pragma once
// The attention methods `oal bench` can time, by name. Built in: softmax-flash (the CPU
// flash-style kernel), softmax-torch (what a LibTorch user writes: matmul + mask +
// softmax + matmul on repeated KV heads), oal (G = 5 groups, CPU kernels), global
// (G = 1, same kernels), and every other registered method (attention/registry.h)
// through its AttentionMethod. Any other attn::AttentionMethod can be timed with
// bench_method_from_attention.
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/method.h"
#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/quadratic.h"
#include "oal/attention/windowed/window.h"
#include "oal/bench/bench_measure.h"

namespace oal::bench {

// The benchmarked layer shape (paper App. E: B = 1, Hq = 14, Hkv = 2, d = dv = 64).
struct BenchShape {
  int64_t batch = 1, q_heads = 14, kv_heads = 2, dim = 64, value_dim = 64;
  int64_t chunk = 64;      // OAL chunk size
  int64_t oal_groups = 5;  // groups of the "oal" method (paper Fig. 3 uses 5)
  attn::Window window{};   // of the windowed rows (oal+window, global+window, window)
  uint64_t seed = 0;
  // Train mode: from this many tokens the kernel layers train through the linear-time
  // chunked form (attn::HdOptions::chunked_train_from), below it the pairwise kernel.
  int64_t chunked_train_from = attn::k_default_chunked_train_from;
};

// A decoder being timed: prime() absorbs a context without timing, step() attends one
// token (q [B, Hq, D], k [B, Hkv, D], v [B, Hkv, Dv], all in the benchmark dtype) into
// the preallocated y [B, Hq, Dv].
class BenchDecoder {
 public:
  virtual ~BenchDecoder() = default;
  virtual void prime(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) = 0;
  virtual void step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    at::Tensor& y) = 0;
  virtual int64_t state_bytes() const = 0;
};

struct BenchMethod {
  std::string name;
  bool quadratic = false;  // cost grows like N² (used to predict and skip huge runs)
  // q [B, Hq, N, D], k/v [B, Hkv, N, D|Dv] in the benchmark dtype -> y [B, Hq, N, Dv].
  std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)> prefill;
  // Train mode: the forward under autograd of the same layer with its parameters
  // trainable (as `oal finetune` holds it); the runner backpropagates a fixed weighting
  // of y. Empty when the method is not timed in training (softmax-torch, the baselines).
  std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)> train;
  // Empty when the method has no decode path. Capacity = most tokens it will hold.
  std::function<std::unique_ptr<BenchDecoder>(at::ScalarType dtype, int64_t capacity)> decoder;
  // FLOP models (0 = unknown): whole prefill of N tokens; one decode step at context N.
  std::function<double(int64_t n)> prefill_flops;
  std::function<double(int64_t n)> decode_flops;
  // prefill_flops split by the GEMM shape the kernel spends them in (empty = no model).
  std::function<std::vector<GemmWork>(int64_t n)> prefill_gemms;
  // Logical state after N tokens (KV cache or recurrent state), bytes.
  std::function<int64_t(int64_t n, at::ScalarType dtype)> state_bytes;
  // Estimated transient bytes of a prefill of N tokens (empty/0 = small); the runner
  // skips cells whose estimate exceeds its memory budget.
  std::function<int64_t(int64_t n, at::ScalarType dtype)> prefill_bytes;
  // Set by prefill: the path the entry point took ("simd (avx512)", "reference (why)"
  // or "aten" for methods without CPU kernels).
  std::shared_ptr<std::string> notice = std::make_shared<std::string>();
};

// Kernels of one layer for speed measurements (speed does not depend on fitted values):
// `groups` groups per query head (group 0 the bulk, the others two dims each, spread
// over the head), Taylor-initialised and perturbed (seeded) so heads differ. fp32 L.
attn::LayerKernels bench_kernels(const BenchShape& shape, int64_t groups);

// softmax-flash, softmax-torch, then every non-softmax registered method, then the
// windowed rows "oal+window" and "global+window" (the kernel beside shape.window) and
// "window" (the windowed-only method), which need a window (W >= 1).
std::vector<std::string> bench_method_names();
// Throws oal::Error("bench") naming the known methods when `name` is unknown.
BenchMethod make_bench_method(const std::string& name, const BenchShape& shape);

// Times any AttentionMethod: prefill = forward() (no grad), decode = new_state(B) primed
// by extend(context) then step(). No FLOP model; state bytes from the DecodeState.
BenchMethod bench_method_from_attention(std::shared_ptr<const attn::AttentionMethod> method,
                                        const BenchShape& shape);

}  // namespace oal::bench
