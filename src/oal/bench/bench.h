#pragma once
// `oal bench`: causal attention forward (prefill) and per-token decode latency of several
// methods side by side (paper Sec. 4.4, Fig. 3, App. E), on the CPU; in train mode the
// forward and backward of one layer as fine-tuning runs it.
//
// Measurement: per (dtype, N, method) fresh seeded inputs, `warmup` untimed calls, then
// `repeats` timed calls (steady_clock wall time); median, min and max ms. Train: the same
// for y = forward(q, k, v) with q, k, v and the parameters recording a graph, then
// backward of a fixed seeded weighting of y (the time of both). Decode: a
// decoder primed with N context tokens (untimed), 4 untimed steps, then `decode_steps`
// individually timed steps; median/min/max per token. With interleave_decode every
// method's decoder at one N is stepped in turn instead (token i of each before token i+1
// of any), so a slow spell of a shared machine falls on all methods alike; peak memory is
// then not measured.
// Peak memory: the process resident-set high-water mark (VmHWM) during one call, after
// resetting it through /proc/self/clear_refs (Linux; if that is refused, the process
// lifetime maximum from getrusage, flagged in the report). Reported absolute and as the
// increase above the resident size just before the call (the call's own workspace). The
// heap's free memory is given back (release_freed_memory) before each prefill cell, so
// its first call allocates afresh; later calls reuse the kept memory (the CLI keeps
// freed memory, core/machine.h), so the timed calls do not pay page faults.
// GEMM rate: an fp32 (and bf16) 1024³ at::mm on the same threads, and the same fp32
// product with the kernels' own gemm_f32, median of 5 each, measured in the same run; a
// method's fraction = its GFLOP/s / the higher of the two fp32 rates (the best GEMM this
// machine was seen to do).
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "oal/attention/method_names.h"
#include "oal/bench/bench_measure.h"
#include "oal/bench/bench_methods.h"
#include "oal/core/machine.h"
#include "oal/core/progress.h"

namespace oal::bench {

struct BenchConfig {
  std::vector<std::string> methods = {"softmax-flash", "softmax-torch", attn::names::oal,
                                      attn::names::global};
  std::vector<int64_t> lengths = {1024, 2048, 4096, 8192, 16384, 32768};
  std::vector<at::ScalarType> dtypes = {at::kBFloat16, at::kFloat};
  bool prefill = true, decode = true;
  // Train mode (fp32 only; other dtypes get no train rows): forward and backward of one
  // layer under autograd, the
  // kernels' parameters trainable, for the methods with a training path (train above).
  bool train = false;
  int repeats = 3, warmup = 1;
  int decode_steps = 32;
  bool interleave_decode = false;  // decode cells of one N stepped in turn (header comment)
  double max_call_seconds = 60;   // skip a cell predicted (from the previous N) to exceed it
  double memory_fraction = 0.5;   // softmax-torch: skip when its N² scores exceed this
                                  // share of MemAvailable
  bool measure_gemm = true;       // false: no GEMM-rate reference (%GEMM columns stay 0)
  BenchShape shape;
};

struct BenchRow {
  std::string method, mode, dtype;  // mode "prefill" | "decode" | "train"
  int64_t n = 0;                    // sequence length (prefill) or context length (decode)
  bool skipped = false;
  std::string note;                 // skip reason or fallback notice
  int samples = 0;
  double ms_median = 0, ms_min = 0, ms_max = 0;  // per call (prefill) or per token (decode)
  double tokens_per_s = 0;
  double gflops = 0;                // 0 when the method has no FLOP model
  double gemm_fraction = 0;         // gflops / max(at::mm fp32, gemm_f32) rate
  // Prefill: the time the method's GEMMs would take at their own shapes' parallel rates
  // (bench_measure.h parallel_shape_rate, measured in the same run) / the measured time;
  // 0 when the method has no GEMM model or GEMM rates were not measured.
  double own_gemm_fraction = 0;
  int64_t peak_rss_bytes = 0, peak_extra_bytes = 0;
  int64_t state_bytes = 0;
};

struct BenchReport {
  MachineInfo machine;
  std::string isa;                 // kernels' instruction set
  double gemm_gflops_fp32 = 0, gemm_gflops_bf16 = 0;  // at::mm
  double gemm_gflops_simd = 0;                      // simd::gemm_f32, fp32
  std::vector<GemmShapeRate> gemm_backends;  // own vs BLAS on the kernels' shapes
  bool memory_reset_ok = true;     // false: peak memory is the process lifetime maximum
  BenchConfig config;
  std::vector<BenchRow> rows;
};

// Runs the benchmark. Throws oal::Error("bench") for unknown methods, N < 1, repeats < 1.
BenchReport run_bench(const BenchConfig& config, const ProgressFn& progress = {});

std::string bench_markdown(const BenchReport& report);
std::string bench_csv(const BenchReport& report);
std::string bench_json(const BenchReport& report);  // {"machine", "gemm", "rows": [...]}
// Fig. 3-style SVG: prefill ms and peak extra memory against N, decode ms/token against
// context (log-log), one series per method and dtype.
std::string bench_svg(const BenchReport& report);

// FLOP models used by the built-in methods (multiply-add = 2):
//   causal softmax prefill: B·Hq·N(N+1)/2·(2D + 2Dv) (only the causal half counts, also
//   for softmax-torch, which computes the full square); softmax decode at context N:
//   B·Hq·N·(2D + 2Dv); OAL prefill: simd::oal_prefill_flops; OAL decode:
//   2·B·(Hq + Hkv)·Df·(Dv + 1).
double softmax_prefill_flops(const BenchShape& s, int64_t n);
double softmax_decode_flops(const BenchShape& s, int64_t n);
double oal_decode_flops(const BenchShape& s);

}  // namespace oal::bench
