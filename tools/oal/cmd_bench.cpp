// `oal bench`: prefill and decode speed of attention methods side by side (paper Fig. 3).
#include <ATen/Parallel.h>
#include <fmt/core.h>

#include <sstream>

#include "command.h"
#include "oal/core/error.h"
#include "oal/core/machine.h"
#include "oal/core/ranges.h"
#include "oal/eval/bench.h"
#include "oal/kernels/cpu/gemm_choice.h"
#include "oal/kernels/cpu/isa.h"
#include "oal/io/atomic_file.h"
#include "progress_bar.h"

namespace {

struct BenchArgs {
  std::string methods = "softmax-flash,softmax-torch,oal,global";
  std::string lengths = "1024,2048,4096,8192,16384,32768";
  std::string dtypes = "bf16,fp32";
  std::string mode = "both", format = "md", out, out_svg, simd, gemm;
  int repeats = 3, warmup = 1, threads = 0, decode_steps = 32;
  int64_t chunk = 64, groups = 5;
  double max_call_seconds = 60;
  bool json = false, quiet = false;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

oal::eval::BenchConfig to_config(const BenchArgs& a) {
  oal::eval::BenchConfig c;
  c.methods = split(a.methods);
  c.lengths.clear();
  for (const auto& n : split(a.lengths)) {
    try {
      c.lengths.push_back(std::stoll(n));
    } catch (const std::exception&) {
      oal::fail("bench", "--n: '{}' is not an integer", n);
    }
  }
  c.dtypes.clear();
  for (const auto& d : split(a.dtypes)) {
    if (d == "bf16") c.dtypes.push_back(at::kBFloat16);
    else if (d == "fp32") c.dtypes.push_back(at::kFloat);
    else oal::fail("bench", "--dtype: '{}', expected bf16 and/or fp32", d);
  }
  oal::check(a.mode == "prefill" || a.mode == "decode" || a.mode == "both", "bench",
             "--mode: '{}', expected prefill, decode or both", a.mode);
  c.prefill = a.mode != "decode";
  c.decode = a.mode != "prefill";
  c.repeats = a.repeats;
  c.warmup = a.warmup;
  c.decode_steps = a.decode_steps;
  c.max_call_seconds = a.max_call_seconds;
  c.shape.chunk = a.chunk;
  c.shape.oal_groups = a.groups;
  return c;
}

void run(BenchArgs a) {
  if (a.json) a.format = "json";
  oal::check(a.format == "md" || a.format == "csv" || a.format == "json", "bench",
             "--format: '{}', expected md, csv or json", a.format);
  if (a.threads > 0) oal::configure_threads(a.threads);
  namespace kc = oal::kernels::cpu;
  if (!a.simd.empty() && a.simd != "auto") kc::force_target(kc::parse_target(a.simd));
  if (a.gemm == "own") kc::set_gemm_policy(kc::GemmPolicy::own);
  else if (a.gemm == "blas") kc::set_gemm_policy(kc::GemmPolicy::blas);
  else oal::check(a.gemm.empty() || a.gemm == "auto", "bench", "--gemm: '{}', expected own, blas or auto", a.gemm);
  const auto cfg = to_config(a);
  oal::cli::ProgressBar bar("bench", !a.quiet);
  const auto rep = oal::eval::run_bench(cfg, bar.fn());
  bar.finish();
  const std::string text = a.format == "json" ? oal::eval::bench_json(rep)
                           : a.format == "csv" ? oal::eval::bench_csv(rep)
                                               : oal::eval::bench_markdown(rep);
  if (!a.out.empty()) oal::io::write_file_atomic(a.out, text);
  else fmt::print("{}", text);
  if (!a.out_svg.empty()) oal::io::write_file_atomic(a.out_svg, oal::eval::bench_svg(rep));
}

oal::cli::Registrar reg{
    "bench", "Time causal attention methods (prefill and per-token decode) side by side",
    [](CLI::App& app) {
      auto a = std::make_shared<BenchArgs>();
      std::string known;
      for (const auto& n : oal::eval::bench_method_names()) known += (known.empty() ? "" : ", ") + n;
      app.add_option("--methods", a->methods, "Comma-separated methods (" + known + ")")
          ->capture_default_str();
      app.add_option("--n", a->lengths, "Comma-separated sequence / context lengths")
          ->capture_default_str();
      app.add_option("--dtype", a->dtypes, "bf16 and/or fp32 (comma-separated)")
          ->capture_default_str();
      app.add_option("--mode", a->mode, "prefill, decode or both")->capture_default_str();
      app.add_option("--repeats", a->repeats, "Timed calls per cell")->capture_default_str();
      app.add_option("--warmup", a->warmup, "Untimed calls before them")->capture_default_str();
      app.add_option("--decode-steps", a->decode_steps, "Timed tokens per decode cell")
          ->capture_default_str();
      app.add_option("--threads", a->threads, "Intra-op threads (0 = $OAL_THREADS or all cores)")
          ->capture_default_str();
      app.add_option("--chunk", a->chunk, "OAL chunk size")->capture_default_str();
      app.add_option("--simd", a->simd,
                     "Force the kernels' SIMD target (avx512, avx2, sse4, scalar; default: the "
                     "best this CPU runs; same as OAL_SIMD)");
      app.add_option("--gemm", a->gemm,
                     "GEMM backend inside the kernels: own, blas or auto (default; same as "
                     "OAL_GEMM)");
      app.add_option("--groups", a->groups, "Groups of the 'oal' method")->capture_default_str();
      app.add_option("--max-call-seconds", a->max_call_seconds,
                     "Skip a cell whose call is predicted to take longer")
          ->capture_default_str();
      app.add_option("--format", a->format, "md, csv or json")->capture_default_str();
      app.add_flag("--json", a->json, "Same as --format json");
      app.add_option("--out", a->out, "Write the table to this file instead of stdout");
      app.add_option("--out-svg", a->out_svg, "Also write a Fig. 3-style SVG plot here");
      app.add_flag("--quiet", a->quiet, "No progress bar");
      return [a] { run(*a); };
    }};

}  // namespace
