#include "oal/eval/bench.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "oal/core/error.h"
#include "oal/io/svg_lines.h"
#include "oal/eval/bench_measure.h"
#include "oal/kernels/cpu/isa.h"
#include "oal/kernels/cpu/oal_plan.h"

namespace oal::eval {
namespace {

using Clock = BenchClock;

void fill_times(BenchRow& row, const std::vector<double>& ms) {
  const Timing t = summarize(ms);
  row.samples = t.samples;
  row.ms_median = t.median;
  row.ms_min = t.min;
  row.ms_max = t.max;
}

void record_memory(BenchRow& row, const MemProbe& probe) {
  row.peak_rss_bytes = probe.peak_bytes();
  row.peak_extra_bytes = probe.extra_bytes();
}

struct Inputs {
  at::Tensor q, k, v;
};

Inputs make_inputs(const BenchShape& s, int64_t n, at::ScalarType dtype, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Inputs in;
  in.q = at::randn({s.batch, s.q_heads, n, s.dim}, gen).to(dtype);
  in.k = at::randn({s.batch, s.kv_heads, n, s.dim}, gen).to(dtype);
  in.v = at::randn({s.batch, s.kv_heads, n, s.value_dim}, gen).to(dtype);
  return in;
}

// Predicted ms of the next N from the previous measurement of the same method.
struct Trend {
  int64_t n = 0;
  double ms = 0;
  double predict(int64_t next, bool quadratic) const {
    if (n == 0) return 0;
    const double r = static_cast<double>(next) / static_cast<double>(n);
    return ms * (quadratic ? r * r : r);
  }
};

void finish_rates(BenchRow& row, double flops, double tokens, double gemm) {
  row.tokens_per_s = tokens / (row.ms_median * 1e-3);
  if (flops > 0) {
    row.gflops = flops / (row.ms_median * 1e-3) / 1e9;
    row.gemm_fraction = gemm > 0 ? row.gflops / gemm : 0;
  }
}

BenchRow skipped_row(const BenchMethod& m, const char* mode, at::ScalarType dt, int64_t n,
                     std::string why) {
  BenchRow r;
  r.method = m.name;
  r.mode = mode;
  r.dtype = dtype_name(dt);
  r.n = n;
  r.skipped = true;
  r.note = std::move(why);
  return r;
}

BenchRow time_prefill(BenchMethod& m, const Inputs& in, at::ScalarType dt, int64_t n,
                      const BenchConfig& cfg, double gemm, bool& reset_ok) {
  BenchRow row;
  row.method = m.name;
  row.mode = "prefill";
  row.dtype = dtype_name(dt);
  row.n = n;
  release_freed_memory();  // the first call's peak is this cell's own (machine.h)
  MemProbe probe;
  probe.start();
  reset_ok = reset_ok && probe.reset_ok();
  std::vector<double> ms;
  for (int i = 0; i < cfg.warmup + cfg.repeats; ++i) {
    const auto t0 = Clock::now();
    at::Tensor y = m.prefill(in.q, in.k, in.v);
    const double t = ms_since(t0);
    if (i == 0) record_memory(row, probe);
    if (i >= cfg.warmup) ms.push_back(t);
  }
  fill_times(row, ms);
  row.note = *m.notice;
  finish_rates(row, m.prefill_flops ? m.prefill_flops(n) : 0, static_cast<double>(in.q.size(0) * n),
               gemm);
  if (m.state_bytes) row.state_bytes = m.state_bytes(n, dt);
  return row;
}

BenchRow time_decode(BenchMethod& m, const BenchShape& s, at::ScalarType dt, int64_t n,
                     const BenchConfig& cfg, double gemm, bool& reset_ok) {
  constexpr int k_warm_steps = 4;
  const int steps = cfg.decode_steps;
  BenchRow row;
  row.method = m.name;
  row.mode = "decode";
  row.dtype = dtype_name(dt);
  row.n = n;
  auto dec = m.decoder(dt, n + k_warm_steps + steps);
  {
    const Inputs ctx = make_inputs(s, n, dt, s.seed + 1);
    dec->prime(ctx.q, ctx.k, ctx.v);
  }
  const Inputs tok = make_inputs(s, k_warm_steps + steps, dt, s.seed + 2);
  at::Tensor y = at::empty({s.batch, s.q_heads, s.value_dim});
  MemProbe probe;
  std::vector<double> ms;
  for (int i = 0; i < k_warm_steps + steps; ++i) {
    const at::Tensor q = tok.q.select(2, i).contiguous(), k = tok.k.select(2, i).contiguous(),
                     v = tok.v.select(2, i).contiguous();
    if (i == k_warm_steps) {
      probe.start();
      reset_ok = reset_ok && probe.reset_ok();
    }
    const auto t0 = Clock::now();
    dec->step(q, k, v, y);
    const double t = ms_since(t0);
    if (i >= k_warm_steps) ms.push_back(t);
  }
  record_memory(row, probe);
  fill_times(row, ms);
  row.note = *m.notice;
  finish_rates(row, m.decode_flops ? m.decode_flops(n) : 0, static_cast<double>(s.batch), gemm);
  row.state_bytes = dec->state_bytes();
  return row;
}

void validate(const BenchConfig& c) {
  check(!c.methods.empty(), "bench", "expected at least one method");
  check(!c.lengths.empty(), "bench", "expected at least one sequence length");
  for (int64_t n : c.lengths) check(n >= 1, "bench", "sequence length {}: expected >= 1", n);
  check(c.repeats >= 1, "bench", "repeats: expected >= 1, got {}", c.repeats);
  check(c.warmup >= 0, "bench", "warmup: expected >= 0, got {}", c.warmup);
  check(c.decode_steps >= 1, "bench", "decode steps: expected >= 1, got {}", c.decode_steps);
  check(c.prefill || c.decode, "bench", "expected prefill and/or decode mode");
  for (auto t : c.dtypes)
    check(t == at::kFloat || t == at::kBFloat16, "bench", "dtype {}: expected bf16 or fp32",
          c10::toString(t));
  const auto& s = c.shape;
  check(s.batch >= 1 && s.kv_heads >= 1 && s.q_heads % s.kv_heads == 0 && s.dim >= 1 &&
            s.value_dim >= 1 && s.chunk >= 1 && s.oal_groups >= 1 && s.oal_groups <= s.dim,
        "bench", "inconsistent shape B={} Hq={} Hkv={} d={} dv={} chunk={} groups={}", s.batch,
        s.q_heads, s.kv_heads, s.dim, s.value_dim, s.chunk, s.oal_groups);
}

}  // namespace

double softmax_prefill_flops(const BenchShape& s, int64_t n) {
  const double pairs = 0.5 * static_cast<double>(n) * static_cast<double>(n + 1);
  return static_cast<double>(s.batch * s.q_heads) * pairs * (2.0 * s.dim + 2.0 * s.value_dim);
}

double softmax_decode_flops(const BenchShape& s, int64_t n) {
  return static_cast<double>(s.batch * s.q_heads) * static_cast<double>(n) *
         (2.0 * s.dim + 2.0 * s.value_dim);
}

double oal_decode_flops(const BenchShape& s) {
  return 2.0 * static_cast<double>(s.batch * (s.q_heads + s.kv_heads)) *
         static_cast<double>(kernels::cpu::oal_feature_dim(s.dim)) * (s.value_dim + 1.0);
}

BenchReport run_bench(const BenchConfig& cfg, const ProgressFn& progress) {
  validate(cfg);
  at::NoGradGuard no_grad;
  BenchReport rep;
  rep.config = cfg;
  rep.machine = machine_info();
  rep.isa = kernels::cpu::target_name(kernels::cpu::active_target());
  std::vector<BenchMethod> methods;
  for (const auto& name : cfg.methods) methods.push_back(make_bench_method(name, cfg.shape));
  rep.gemm_gflops_fp32 = aten_gemm_rate(at::kFloat);
  rep.gemm_gflops_bf16 = aten_gemm_rate(at::kBFloat16);
  rep.gemm_gflops_kernels = kernel_gemm_rate();
  rep.gemm_backends = gemm_backend_rates();
  const double gemm_ref = std::max(rep.gemm_gflops_fp32, rep.gemm_gflops_kernels);
  const int64_t modes = (cfg.prefill ? 1 : 0) + (cfg.decode ? 1 : 0);
  const int64_t total = modes * static_cast<int64_t>(cfg.dtypes.size() * cfg.lengths.size() *
                                                     methods.size());
  int64_t done = 0;
  auto tick = [&](const BenchRow& r) {
    rep.rows.push_back(r);
    report(progress, ++done, total, "cells",
           fmt::format("{} {} {} N={}", r.method, r.mode, r.dtype, r.n));
  };
  std::vector<int64_t> lengths = cfg.lengths;
  std::sort(lengths.begin(), lengths.end());
  for (auto dt : cfg.dtypes) {
    if (cfg.prefill) {
      std::vector<Trend> trend(methods.size());
      for (int64_t n : lengths) {
        const Inputs in = make_inputs(cfg.shape, n, dt, cfg.shape.seed);
        const double budget = cfg.memory_fraction * static_cast<double>(mem_available_bytes());
        for (size_t mi = 0; mi < methods.size(); ++mi) {
          BenchMethod& m = methods[mi];
          const double need = m.prefill_bytes ? static_cast<double>(m.prefill_bytes(n, dt)) : 0;
          const double predicted = trend[mi].predict(n, m.quadratic) * (cfg.warmup + cfg.repeats);
          if (need > budget) {
            tick(skipped_row(m, "prefill", dt, n,
                             fmt::format("memory guard: needs ~{:.1f} GB, budget {:.1f} GB",
                                         need / 1e9, budget / 1e9)));
          } else if (predicted > cfg.max_call_seconds * 1e3 * (cfg.warmup + cfg.repeats)) {
            tick(skipped_row(m, "prefill", dt, n,
                             fmt::format("time guard: predicted {:.0f} s per call > {:.0f} s",
                                         predicted / 1e3 / (cfg.warmup + cfg.repeats),
                                         cfg.max_call_seconds)));
          } else {
            BenchRow r = time_prefill(m, in, dt, n, cfg, gemm_ref, rep.memory_reset_ok);
            trend[mi] = {n, r.ms_median};
            tick(r);
          }
        }
      }
    }
    if (cfg.decode) {
      for (int64_t n : lengths)
        for (auto& m : methods) {
          if (!m.decoder) {
            tick(skipped_row(m, "decode", dt, n, "no decode path"));
            continue;
          }
          tick(time_decode(m, cfg.shape, dt, n, cfg, gemm_ref, rep.memory_reset_ok));
        }
    }
  }
  return rep;
}

// ---- output ---------------------------------------------------------------------------

namespace {

std::string num(double v, int digits) {
  return v > 0 ? fmt::format("{:.{}f}", v, digits) : "-";
}
std::string mb(int64_t b) { return b > 0 ? fmt::format("{:.1f}", b / 1048576.0) : "-"; }

std::string header_lines(const BenchReport& r, const char* prefix) {
  const auto& m = r.machine;
  const auto& s = r.config.shape;
  std::string out;
  out += fmt::format("{}machine: {} ({} logical cores), {} threads, kernels {}, BLAS {}\n", prefix,
                     m.cpu, m.logical_cores, m.threads, r.isa, m.blas);
  out += fmt::format("{}oal commit {}, LibTorch {}\n", prefix, m.commit, m.libtorch);
  out += fmt::format(
      "{}shape: B={} Hq={} Hkv={} d={} dv={}; OAL chunk {}, oal G={}; warmup {}, repeats {}, "
      "decode steps {}\n",
      prefix, s.batch, s.q_heads, s.kv_heads, s.dim, s.value_dim, s.chunk, s.oal_groups,
      r.config.warmup, r.config.repeats, r.config.decode_steps);
  out += fmt::format("{}GEMM 1024^3: at::mm fp32 {:.1f} GFLOP/s, bf16 {:.1f} GFLOP/s; oal gemm_f32 "
                     "{:.1f} GFLOP/s (%GEMM = GFLOP/s / the higher fp32 rate)\n",
                     prefix, r.gemm_gflops_fp32, r.gemm_gflops_bf16, r.gemm_gflops_kernels);
  out += fmt::format("{}peak memory: process RSS high-water mark during one call{}; extra = "
                     "above RSS before the call\n",
                     prefix, r.memory_reset_ok ? " (VmHWM reset per call)"
                                               : " (NOT resettable here: lifetime maximum)");
  return out;
}

}  // namespace

std::string bench_markdown(const BenchReport& r) {
  std::string out = header_lines(r, "- ");
  if (!r.gemm_backends.empty()) {
    out += "\n### GEMM backends inside the kernels (one thread, GFLOP/s)\n\n";
    out += "| shape | own micro-kernel | BLAS | chosen |\n|---|---:|---:|---|\n";
    for (const auto& g : r.gemm_backends)
      out += fmt::format("| {} | {:.1f} | {:.1f} | {} |\n", g.shape, g.own, g.blas, g.chosen);
  }
  for (const char* mode : {"prefill", "decode"}) {
    bool any = false;
    for (const auto& row : r.rows) any = any || row.mode == mode;
    if (!any) continue;
    out += fmt::format("\n### {}{}\n\n", mode,
                       std::string(mode) == "decode" ? " (per token, context N)" : "");
    out += "| method | dtype | N | median ms | min–max ms | tokens/s | GFLOP/s | % GEMM | peak RSS MB | extra MB | state MB | note |\n";
    out += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (const auto& row : r.rows) {
      if (row.mode != mode) continue;
      if (row.skipped) {
        out += fmt::format("| {} | {} | {} | - | - | - | - | - | - | - | - | skipped: {} |\n",
                           row.method, row.dtype, row.n, row.note);
        continue;
      }
      out += fmt::format("| {} | {} | {} | {:.3f} | {:.3f}–{:.3f} | {:.0f} | {} | {} | {} | {} | {} | {} |\n",
                         row.method, row.dtype, row.n, row.ms_median, row.ms_min, row.ms_max,
                         row.tokens_per_s, num(row.gflops, 1),
                         row.gemm_fraction > 0 ? fmt::format("{:.0f}%", 100 * row.gemm_fraction) : "-",
                         mb(row.peak_rss_bytes), mb(row.peak_extra_bytes), mb(row.state_bytes),
                         row.note);
    }
  }
  return out;
}

std::string bench_csv(const BenchReport& r) {
  std::string out = header_lines(r, "# ");
  out += "method,mode,dtype,n,skipped,samples,ms_median,ms_min,ms_max,tokens_per_s,gflops,"
         "gemm_fraction,peak_rss_bytes,peak_extra_bytes,state_bytes,note\n";
  for (const auto& row : r.rows) {
    std::string note = row.note;
    std::replace(note.begin(), note.end(), '"', '\'');
    out += fmt::format("{},{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.2f},{:.3f},{:.4f},{},{},{},\"{}\"\n",
                       row.method, row.mode, row.dtype, row.n, row.skipped ? 1 : 0, row.samples,
                       row.ms_median, row.ms_min, row.ms_max, row.tokens_per_s, row.gflops,
                       row.gemm_fraction, row.peak_rss_bytes, row.peak_extra_bytes,
                       row.state_bytes, note);
  }
  return out;
}

std::string bench_json(const BenchReport& r) {
  nlohmann::json j;
  const auto& m = r.machine;
  j["machine"] = {{"cpu", m.cpu},       {"logical_cores", m.logical_cores},
                  {"threads", m.threads}, {"blas", m.blas},
                  {"libtorch", m.libtorch}, {"commit", m.commit},
                  {"kernels_isa", r.isa}};
  j["gemm_gflops"] = {{"fp32", r.gemm_gflops_fp32},
                      {"bf16", r.gemm_gflops_bf16},
                      {"fp32_kernels", r.gemm_gflops_kernels}};
  j["gemm_backends"] = nlohmann::json::array();
  for (const auto& g : r.gemm_backends)
    j["gemm_backends"].push_back(
        {{"shape", g.shape}, {"own", g.own}, {"blas", g.blas}, {"chosen", g.chosen}});
  const auto& s = r.config.shape;
  j["config"] = {{"batch", s.batch},           {"q_heads", s.q_heads},
                 {"kv_heads", s.kv_heads},     {"dim", s.dim},
                 {"value_dim", s.value_dim},   {"chunk", s.chunk},
                 {"oal_groups", s.oal_groups}, {"warmup", r.config.warmup},
                 {"repeats", r.config.repeats}, {"decode_steps", r.config.decode_steps}};
  j["memory"] = r.memory_reset_ok ? "VmHWM reset per call" : "process lifetime maximum";
  j["rows"] = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json x = {{"method", row.method}, {"mode", row.mode}, {"dtype", row.dtype},
                        {"n", row.n},           {"skipped", row.skipped}, {"note", row.note}};
    if (!row.skipped) {
      x["samples"] = row.samples;
      x["ms_median"] = row.ms_median;
      x["ms_min"] = row.ms_min;
      x["ms_max"] = row.ms_max;
      x["tokens_per_s"] = row.tokens_per_s;
      x["gflops"] = row.gflops > 0 ? nlohmann::json(row.gflops) : nlohmann::json(nullptr);
      x["gemm_fraction"] = row.gemm_fraction;
      x["peak_rss_bytes"] = row.peak_rss_bytes;
      x["peak_extra_bytes"] = row.peak_extra_bytes;
      x["state_bytes"] = row.state_bytes;
    } else {
      x["ms_median"] = nullptr;
      x["gflops"] = nullptr;
    }
    j["rows"].push_back(std::move(x));
  }
  return j.dump(2) + "\n";
}

std::string bench_svg(const BenchReport& r) {
  io::LinePanel time{"Prefill runtime", "sequence length N", "ms", true, true, {}};
  io::LinePanel mem{"Prefill peak extra memory", "sequence length N", "MB", true, true, {}};
  io::LinePanel dec{"Decode latency per token", "context length", "ms / token", true, true, {}};
  auto series_in = [](io::LinePanel& p, const std::string& name) -> io::LineSeries& {
    for (auto& s : p.series)
      if (s.name == name) return s;
    p.series.push_back({name, {}, {}});
    return p.series.back();
  };
  for (const auto& row : r.rows) {
    if (row.skipped) continue;
    const std::string name = row.method + " " + row.dtype;
    const double n = static_cast<double>(row.n);
    if (row.mode == "prefill") {
      auto& t = series_in(time, name);
      t.x.push_back(n);
      t.y.push_back(row.ms_median);
      auto& m = series_in(mem, name);
      m.x.push_back(n);
      m.y.push_back(row.peak_extra_bytes / 1048576.0);
    } else {
      auto& d = series_in(dec, name);
      d.x.push_back(n);
      d.y.push_back(row.ms_median);
    }
  }
  std::vector<io::LinePanel> panels;
  for (auto* p : {&time, &mem, &dec})
    if (!p->series.empty()) panels.push_back(*p);
  check(!panels.empty(), "bench", "nothing measured to plot");
  const auto& s = r.config.shape;
  return io::line_panels_svg(
      fmt::format("Causal attention on CPU ({}, {} threads): B={} Hq={} Hkv={} d={}",
                  r.machine.cpu, r.machine.threads, s.batch, s.q_heads, s.kv_heads, s.dim),
      panels);
}

}  // namespace oal::eval
