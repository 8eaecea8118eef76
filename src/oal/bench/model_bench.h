#pragma once
// `oal bench --model`: what a user of a whole model feels, side by side — prefill
// tokens/s and per-token decode latency of the original (softmax) model, the model with
// every layer converted to OAL, and the paper-range hybrid (adapt/hybrid.h), at several
// contexts, with peak memory. Attention goes through the same entry points the model
// always runs (SoftmaxAttention / QuadraticAttention and their decoders).
//
// Prefill of N tokens: Transformer::hidden_states on one sequence of N seeded random
// ids (untimed warm-up calls, then timed repeats; median). FLOPs = 2 · layer parameters
// · N (the q/k/v/o and MLP GEMMs; embedding lookup and the lm_head are not used) plus
// each layer's attention (softmax: causal N(N+1)/2 pairs; OAL: oal_prefill_flops);
// %GEMM = GFLOP/s over the best fp32 GEMM rate of the same run.
// Decode at context N: every layer's decoder primed with N random post-RoPE tokens
// (DecodeState::absorb: a softmax cache appends, an OAL state absorbs without readout;
// untimed), then `decode_steps` timed tokens, each one extend_hidden of one id plus the
// lm_head on its hidden state (the whole per-token work of generation); median ms.
// The OAL layers use synthetic kernels (bench/bench_methods.h bench_kernels): speed does
// not depend on fitted values.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oal/attention/method_names.h"
#include "oal/attention/windowed/window.h"
#include "oal/core/machine.h"
#include "oal/core/progress.h"
#include "oal/model/fast_paths.h"
#include "oal/model/transformer.h"

namespace oal::bench {

struct ModelBenchConfig {
  std::vector<std::string> variants = {attn::names::softmax, attn::names::oal, "hybrid"};
  std::vector<int64_t> prefill_lengths = {1024, 4096};
  std::vector<int64_t> decode_contexts = {1024, 4096, 16384, 32768};
  std::string hybrid_layers = "default";  // adapt/hybrid.h range syntax
  int repeats = 2, warmup = 1, decode_steps = 8;
  int64_t chunk = 64, groups = 3;  // OAL layers: chunk size, groups per head
  attn::Window window{};           // set: the OAL layers run beside this exact window
  uint64_t seed = 0;
};

struct ModelBenchRow {
  std::string variant, mode;  // mode "prefill" | "decode"
  int64_t n = 0;              // prompt length (prefill) or context (decode)
  std::string layers;         // converted layers, e.g. "3-20 of 24" ("none" for softmax)
  int samples = 0;
  double ms_median = 0, ms_min = 0, ms_max = 0;  // per call (prefill) or token (decode)
  double tokens_per_s = 0;
  double gflops = 0, gemm_fraction = 0;          // prefill only
  int64_t peak_rss_bytes = 0, peak_extra_bytes = 0;
  int64_t state_bytes = 0;                       // decode: all layers' decoder states
};

struct ModelBenchReport {
  MachineInfo machine;
  std::string isa, model;   // kernels' SIMD target; model description
  std::string kv_cache;     // the softmax layers' KV cache type ("f32" | "f16")
  int64_t ubatch = 0;       // prefill ubatch (0: the whole prompt through the forward)
  std::string quant_dot;    // the model's TransformerOptions::quant_dot: "dequant" | "int8"
  int64_t parameters = 0;
  double gemm_gflops_fp32 = 0;  // best of at::mm and the kernels' gemm (bench_measure.h)
  bool memory_reset_ok = true;
  ModelBenchConfig config;
  std::vector<ModelBenchRow> rows;
  // Per variant, the code each op ran (model/fast_paths.h), read as it was timed.
  std::vector<std::pair<std::string, std::vector<model::FastPath>>> fast_paths;
};

// Times every variant; the model's attention methods are replaced per variant and
// restored to softmax at the end. Throws oal::Error("bench") on an unknown variant, a
// bad layer range or lengths < 1.
ModelBenchReport run_model_bench(model::Transformer& model, const std::string& description,
                                 const ModelBenchConfig& config,
                                 const ProgressFn& progress = {});

std::string model_bench_markdown(const ModelBenchReport& report);
std::string model_bench_csv(const ModelBenchReport& report);
std::string model_bench_json(const ModelBenchReport& report);

}  // namespace oal::bench
