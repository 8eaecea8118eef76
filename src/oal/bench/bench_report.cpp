// `oal bench`'s report formats: markdown, CSV, JSON and the Fig. 3-style SVG.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "oal/bench/bench.h"
#include "oal/core/error.h"
#include "oal/figures/svg_lines.h"

namespace oal::bench {

namespace {

std::string num(double v, int digits) {
  return v > 0 ? fmt::format("{:.{}f}", v, digits) : "-";
}
std::string percent(double f) {
  return f > 0 ? fmt::format("{:.0f}%", 100 * f) : "-";
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
  out += fmt::format(
      "{}GEMM 1024^3: at::mm fp32 {:.1f} GFLOP/s, bf16 {:.1f} GFLOP/s; oal gemm_f32 "
      "{:.1f} GFLOP/s (%GEMM = GFLOP/s / the higher fp32 rate; own shapes = time the method's "
      "GEMMs take at their own shapes' rate on all threads / measured time)\n",
      prefix, r.gemm_gflops_fp32, r.gemm_gflops_bf16, r.gemm_gflops_simd);
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
  for (const char* mode : {"prefill", "decode", "train"}) {
    bool any = false;
    for (const auto& row : r.rows) any = any || row.mode == mode;
    if (!any) continue;
    const std::string m = mode;
    out += fmt::format("\n### {}{}\n\n", mode,
                       m == "decode"  ? " (per token, context N)"
                       : m == "train" ? fmt::format(" (forward + backward of one layer; the "
                                                    "chunked form from {} tokens)",
                                                    r.config.shape.chunked_train_from)
                                      : std::string());
    out +=
        "| method | dtype | N | median ms | min–max ms | tokens/s | GFLOP/s | % GEMM | % GEMM own "
        "shapes | peak RSS MB | extra MB | state MB | note |\n";
    out += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (const auto& row : r.rows) {
      if (row.mode != mode) continue;
      if (row.skipped) {
        out += fmt::format("| {} | {} | {} | - | - | - | - | - | - | - | - | - | skipped: {} |\n",
                           row.method, row.dtype, row.n, row.note);
        continue;
      }
      out += fmt::format(
          "| {} | {} | {} | {:.3f} | {:.3f}–{:.3f} | {:.0f} | {} | {} | {} | {} | {} | {} | {} |\n",
          row.method, row.dtype, row.n, row.ms_median, row.ms_min, row.ms_max, row.tokens_per_s,
          num(row.gflops, 1), percent(row.gemm_fraction), percent(row.own_gemm_fraction),
          mb(row.peak_rss_bytes), mb(row.peak_extra_bytes), mb(row.state_bytes), row.note);
    }
  }
  return out;
}

std::string bench_csv(const BenchReport& r) {
  std::string out = header_lines(r, "# ");
  out +=
      "method,mode,dtype,n,skipped,samples,ms_median,ms_min,ms_max,tokens_per_s,gflops,"
      "gemm_fraction,own_gemm_fraction,peak_rss_bytes,peak_extra_bytes,state_bytes,note\n";
  for (const auto& row : r.rows) {
    std::string note = row.note;
    std::replace(note.begin(), note.end(), '"', '\'');
    out += fmt::format(
        "{},{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.2f},{:.3f},{:.4f},{:.4f},{},{},{},\"{}\"\n",
        row.method, row.mode, row.dtype, row.n, row.skipped ? 1 : 0, row.samples, row.ms_median,
        row.ms_min, row.ms_max, row.tokens_per_s, row.gflops, row.gemm_fraction,
        row.own_gemm_fraction, row.peak_rss_bytes, row.peak_extra_bytes, row.state_bytes, note);
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
                      {"fp32_kernels", r.gemm_gflops_simd}};
  j["gemm_backends"] = nlohmann::json::array();
  for (const auto& g : r.gemm_backends)
    j["gemm_backends"].push_back(
        {{"shape", g.shape}, {"own", g.own}, {"blas", g.blas}, {"chosen", g.chosen}});
  const auto& s = r.config.shape;
  j["config"] = {{"batch", s.batch},           {"q_heads", s.q_heads},
                 {"kv_heads", s.kv_heads},     {"dim", s.dim},
                 {"value_dim", s.value_dim},   {"chunk", s.chunk},
                 {"oal_groups", s.oal_groups}, {"warmup", r.config.warmup},
                 {"repeats", r.config.repeats}, {"decode_steps", r.config.decode_steps},
                 {"chunked_train_from", s.chunked_train_from}};
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
      x["own_gemm_fraction"] = row.own_gemm_fraction;
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
  figures::LinePanel time{"Prefill runtime", "sequence length N", "ms", true, true, {}};
  figures::LinePanel mem{"Prefill peak extra memory", "sequence length N", "MB", true, true, {}};
  figures::LinePanel dec{
      "Decode latency per token", "context length", "ms / token", true, true, {}};
  auto series_in = [](figures::LinePanel& p, const std::string& name) -> figures::LineSeries& {
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
  std::vector<figures::LinePanel> panels;
  for (auto* p : {&time, &mem, &dec})
    if (!p->series.empty()) panels.push_back(*p);
  check(!panels.empty(), "bench", "nothing measured to plot");
  const auto& s = r.config.shape;
  return figures::line_panels_svg(
      fmt::format("Causal attention on CPU ({}, {} threads): B={} Hq={} Hkv={} d={}", r.machine.cpu,
                  r.machine.threads, s.batch, s.q_heads, s.kv_heads, s.dim),
      panels);
}

}  // namespace oal::bench
