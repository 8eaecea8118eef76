#include "oal/bench/model_bench.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "oal/attention/softmax/softmax_method.h"
#include "oal/bench/bench_measure.h"
#include "oal/bench/model_variants.h"
#include "oal/core/error.h"
#include "oal/formats/model_summary.h"
#include "oal/simd/isa.h"
#include "oal/simd/linear_quant.h"
#include "oal/simd/oal_prefill.h"

namespace oal::bench {
namespace {

constexpr const char* k_op = "bench";

// Weights of the per-token GEMMs of all layers (q/k/v/o, gate/up/down).
double layer_parameters(const model::Transformer& m) {
  double n = 0;
  for (int64_t l = 0; l < m.num_layers(); ++l) {
    const auto& L = m.layer(l);
    for (const model::Linear* p : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj,
                                   &L.up_proj, &L.down_proj})
      n += static_cast<double>(p->out_features() * p->in_features());
  }
  return n;
}

double attention_flops(const model::ModelConfig& c, const std::vector<int64_t>& converted,
                       int64_t n, int64_t chunk) {
  simd::AttentionDims d;
  d.q_heads = c.num_heads;
  d.kv_heads = c.num_kv_heads;
  d.q_len = d.k_len = n;
  d.dim = d.value_dim = c.head_dim;
  const double oal = simd::oal_prefill_flops(d, chunk);
  const double nn = static_cast<double>(n);
  const double softmax = static_cast<double>(c.num_heads) * nn * (nn + 1) / 2 * 4.0 * c.head_dim;
  const double k = static_cast<double>(converted.size());
  return k * oal + (static_cast<double>(c.num_layers) - k) * softmax;
}

void fill(ModelBenchRow& row, const std::vector<double>& ms, const MemProbe& probe) {
  const Timing t = summarize(ms);
  row.samples = t.samples;
  row.ms_median = t.median;
  row.ms_min = t.min;
  row.ms_max = t.max;
  row.peak_rss_bytes = probe.peak_bytes();
  row.peak_extra_bytes = probe.extra_bytes();
}

// One prefill as a prompt runs: into fresh decode states in the model's ubatches
// (options().ubatch > 0: activations O(ubatch)), or, with ubatch 0, the whole prompt at
// once through the stateless forward.
void prefill(const model::Transformer& m, const at::Tensor& ids) {
  if (m.options().ubatch > 0) {
    auto states = m.new_states(1);
    m.extend_hidden(ids, states);
  } else {
    m.hidden_states(ids);
  }
}

ModelBenchRow time_prefill(const model::Transformer& m, int64_t n, const ModelBenchConfig& cfg,
                           bool& reset_ok) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(cfg.seed + 1);
  const at::Tensor ids = at::randint(m.config().vocab_size, {1, n}, gen, at::kLong);
  ModelBenchRow row;
  row.mode = "prefill";
  row.n = n;
  release_freed_memory();  // the first call's peak is this cell's own (core/machine.h)
  MemProbe probe;
  probe.start();
  reset_ok = reset_ok && probe.reset_ok();
  std::vector<double> ms;
  int64_t peak = 0, extra = 0;  // of the first call: the cell's own workspace
  for (int i = 0; i < cfg.warmup + cfg.repeats; ++i) {
    const auto t0 = BenchClock::now();
    prefill(m, ids);
    const double t = ms_since(t0);
    if (i == 0) peak = probe.peak_bytes(), extra = probe.extra_bytes();
    if (i >= cfg.warmup) ms.push_back(t);
  }
  fill(row, ms, probe);
  row.peak_rss_bytes = peak;
  row.peak_extra_bytes = extra;
  row.tokens_per_s = static_cast<double>(n) / (row.ms_median * 1e-3);
  return row;
}

ModelBenchRow time_decode(const model::Transformer& m, int64_t n, const ModelBenchConfig& cfg,
                          bool& reset_ok) {
  const auto& c = m.config();
  release_freed_memory();  // a previous cell's freed pages do not count as this one's peak
  auto states = m.new_states(1);
  {  // Prime every layer with n random post-RoPE tokens (only shapes matter for speed).
    auto gen = at::make_generator<at::CPUGeneratorImpl>(cfg.seed + 2);
    for (auto& st : states)
      st->absorb(at::randn({1, c.num_heads, n, c.head_dim}, gen),
                 at::randn({1, c.num_kv_heads, n, c.head_dim}, gen),
                 at::randn({1, c.num_kv_heads, n, c.head_dim}, gen));
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(cfg.seed + 3);
  constexpr int k_warm_steps = 2;
  ModelBenchRow row;
  row.mode = "decode";
  row.n = n;
  MemProbe probe;
  std::vector<double> ms;
  for (int i = 0; i < k_warm_steps + cfg.decode_steps; ++i) {
    const at::Tensor id = at::randint(c.vocab_size, {1, 1}, gen, at::kLong);
    if (i == k_warm_steps) {
      probe.start();
      reset_ok = reset_ok && probe.reset_ok();
    }
    const auto t0 = BenchClock::now();
    const at::Tensor h = m.extend_hidden(id, states);
    m.logits(h.select(1, 0));
    const double t = ms_since(t0);
    if (i >= k_warm_steps) ms.push_back(t);
  }
  fill(row, ms, probe);
  row.tokens_per_s = 1e3 / row.ms_median;
  for (const auto& st : states) row.state_bytes += st->state_bytes();
  return row;
}

void validate(const ModelBenchConfig& c) {
  check(!c.variants.empty(), k_op, "expected at least one model variant");
  for (int64_t n : c.prefill_lengths) check(n >= 1, k_op, "prefill length {}: expected >= 1", n);
  for (int64_t n : c.decode_contexts) check(n >= 1, k_op, "decode context {}: expected >= 1", n);
  check(c.repeats >= 1 && c.warmup >= 0 && c.decode_steps >= 1, k_op,
        "repeats >= 1, warmup >= 0 and decode steps >= 1 expected");
  check(c.chunk >= 1 && c.groups >= 1, k_op, "chunk and groups must be >= 1");
}

}  // namespace

ModelBenchReport run_model_bench(model::Transformer& m, const std::string& description,
                                 const ModelBenchConfig& cfg, const ProgressFn& progress) {
  validate(cfg);
  check_variant_groups(cfg.groups, m.config().head_dim);
  at::NoGradGuard no_grad;
  ModelBenchReport rep;
  rep.config = cfg;
  rep.machine = machine_info();
  rep.isa = simd::target_name(simd::active_target());
  rep.model = description;
  rep.parameters = m.num_parameters();
  rep.kv_cache = std::string(attn::kv_cache_type_name(m.options().kv_cache));
  rep.ubatch = m.options().ubatch;
  rep.quant_dot = std::string(simd::quant_dot_name(m.options().quant_dot));
  rep.gemm_gflops_fp32 = std::max(aten_gemm_rate(at::kFloat), simd_gemm_rate());
  std::vector<std::vector<int64_t>> layers;
  for (const auto& v : cfg.variants)  // all ranges checked before anything is timed
    layers.push_back(variant_layers(v, cfg.hybrid_layers, m.num_layers()));
  const double params = layer_parameters(m);
  const int64_t total = static_cast<int64_t>(
      cfg.variants.size() * (cfg.prefill_lengths.size() + cfg.decode_contexts.size()));
  int64_t done = 0;
  auto tick = [&](ModelBenchRow row, const std::string& variant, const std::vector<int64_t>& l) {
    row.variant = variant;
    row.layers = describe_layers(l, m.num_layers());
    report(progress, ++done, total, "cells", fmt::format("{} {} N={}", variant, row.mode, row.n));
    rep.rows.push_back(std::move(row));
  };
  const VariantSetup setup{cfg.chunk, cfg.groups, cfg.window, cfg.seed, false};
  for (size_t i = 0; i < cfg.variants.size(); ++i) {
    apply_variant(m, layers[i], setup);
    rep.fast_paths.emplace_back(cfg.variants[i], model::fast_paths(m));
    for (int64_t n : cfg.prefill_lengths) {
      ModelBenchRow row = time_prefill(m, n, cfg, rep.memory_reset_ok);
      const double flops = 2.0 * params * n + attention_flops(m.config(), layers[i], n, cfg.chunk);
      row.gflops = flops / (row.ms_median * 1e-3) / 1e9;
      row.gemm_fraction = row.gflops / rep.gemm_gflops_fp32;
      tick(std::move(row), cfg.variants[i], layers[i]);
    }
    for (int64_t n : cfg.decode_contexts)
      tick(time_decode(m, n, cfg, rep.memory_reset_ok), cfg.variants[i], layers[i]);
  }
  apply_variant(m, {}, setup);
  return rep;
}

std::string model_bench_markdown(const ModelBenchReport& r) {
  std::string out = fmt::format(
      "# oal bench --model\n\nmodel: {} ({:.1f}M parameters)\nmachine: {} ({} logical cores, "
      "{} threads), kernels {}, BLAS {}\nbest fp32 GEMM: {:.1f} GFLOP/s; softmax KV cache {}; "
      "prefill ubatch {}; quantized decode products {}\n\n",
      r.model, r.parameters / 1e6, r.machine.cpu, r.machine.logical_cores, r.machine.threads, r.isa,
      r.machine.blas, r.gemm_gflops_fp32, r.kv_cache,
      r.ubatch > 0 ? std::to_string(r.ubatch) : std::string("whole prompt"), r.quant_dot);
  out +=
      "| variant | converted | mode | N | ms (median) | min–max | tokens/s | GFLOP/s | %GEMM | "
      "peak RSS MiB | +MiB | state MiB |\n";
  out += "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& x : r.rows)
    out += fmt::format(
        "| {} | {} | {} | {} | {:.2f} | {:.2f}–{:.2f} | {:.1f} | {} | {} | {:.0f} | {:.0f} | "
        "{:.1f} |\n",
        x.variant, x.layers, x.mode, x.n, x.ms_median, x.ms_min, x.ms_max, x.tokens_per_s,
        x.mode == "prefill" ? fmt::format("{:.1f}", x.gflops) : "",
        x.mode == "prefill" ? fmt::format("{:.0f}%", 100 * x.gemm_fraction) : "",
        x.peak_rss_bytes / 1048576.0, x.peak_extra_bytes / 1048576.0, x.state_bytes / 1048576.0);
  if (!r.memory_reset_ok)
    out += "\nPeak RSS could not be reset between cells: peaks are process maxima so far.\n";
  return out;
}

std::string model_bench_csv(const ModelBenchReport& r) {
  std::string out =
      "variant,converted,mode,n,ms_median,ms_min,ms_max,tokens_per_s,gflops,gemm_fraction,"
      "peak_rss_bytes,peak_extra_bytes,state_bytes\n";
  for (const auto& x : r.rows)
    out +=
        fmt::format("{},{},{},{},{:.4f},{:.4f},{:.4f},{:.3f},{:.3f},{:.4f},{},{},{}\n", x.variant,
                    x.layers, x.mode, x.n, x.ms_median, x.ms_min, x.ms_max, x.tokens_per_s,
                    x.gflops, x.gemm_fraction, x.peak_rss_bytes, x.peak_extra_bytes, x.state_bytes);
  return out;
}

std::string model_bench_json(const ModelBenchReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& x : r.rows)
    rows.push_back({{"variant", x.variant}, {"converted", x.layers}, {"mode", x.mode}, {"n", x.n},
                    {"samples", x.samples}, {"ms_median", x.ms_median}, {"ms_min", x.ms_min},
                    {"ms_max", x.ms_max}, {"tokens_per_s", x.tokens_per_s}, {"gflops", x.gflops},
                    {"gemm_fraction", x.gemm_fraction}, {"peak_rss_bytes", x.peak_rss_bytes},
                    {"peak_extra_bytes", x.peak_extra_bytes}, {"state_bytes", x.state_bytes}});
  nlohmann::json j = {{"model", r.model},
                      {"parameters", r.parameters},
                      {"machine",
                       {{"cpu", r.machine.cpu},
                        {"logical_cores", r.machine.logical_cores},
                        {"threads", r.machine.threads},
                        {"blas", r.machine.blas}}},
                      {"kernels_isa", r.isa},
                      {"kv_cache", r.kv_cache},
                      {"ubatch", r.ubatch},
                      {"quant_dot", r.quant_dot},
                      {"gemm_gflops_fp32", r.gemm_gflops_fp32},
                      {"memory_reset_ok", r.memory_reset_ok},
                      {"rows", rows}};
  for (const auto& [variant, paths] : r.fast_paths)
    j["fast_paths"][variant] = formats::fast_paths_json(paths);
  return j.dump(2) + "\n";
}

}  // namespace oal::bench
