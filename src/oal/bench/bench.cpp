#include "oal/bench/bench.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>

#include "oal/bench/bench_measure.h"
#include "oal/core/error.h"
#include "oal/simd/isa.h"
#include "oal/simd/oal_plan.h"

namespace oal::bench {
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

// A row's identity: method, mode, dtype, N.
BenchRow row_of(const BenchMethod& m, const char* mode, at::ScalarType dt, int64_t n) {
  BenchRow r;
  r.method = m.name;
  r.mode = mode;
  r.dtype = dtype_name(dt);
  r.n = n;
  return r;
}

BenchRow skipped_row(const BenchMethod& m, const char* mode, at::ScalarType dt, int64_t n,
                     std::string why) {
  BenchRow r = row_of(m, mode, dt, n);
  r.skipped = true;
  r.note = std::move(why);
  return r;
}

// warmup + repeats calls of `call`, the repeats timed into the row (fill_times), the
// first call's peak memory recorded after the heap's freed memory was given back.
void time_calls(BenchRow& row, const BenchConfig& cfg, bool& reset_ok,
                const std::function<void()>& call) {
  release_freed_memory();  // the first call's peak is this cell's own (machine.h)
  MemProbe probe;
  probe.start();
  reset_ok = reset_ok && probe.reset_ok();
  std::vector<double> ms;
  for (int i = 0; i < cfg.warmup + cfg.repeats; ++i) {
    const auto t0 = Clock::now();
    call();
    const double t = ms_since(t0);
    if (i == 0) record_memory(row, probe);
    if (i >= cfg.warmup) ms.push_back(t);
  }
  fill_times(row, ms);
}

// parallel_shape_rate of each GEMM shape the timed methods issue, measured once per run.
class ShapeRates {
 public:
  double of(const GemmShape& s) {
    auto it = rates_.find(s);
    if (it == rates_.end()) it = rates_.emplace(s, parallel_shape_rate(s)).first;
    return it->second;
  }

 private:
  std::map<GemmShape, double> rates_;
};

// Milliseconds the GEMMs of `work` would take at their shapes' parallel rates.
double ideal_gemm_ms(const std::vector<GemmWork>& work, ShapeRates& rates) {
  double ms = 0;
  for (const GemmWork& w : work) ms += w.flops / (rates.of(w.shape) * 1e9) * 1e3;
  return ms;
}

BenchRow time_prefill(BenchMethod& m, const Inputs& in, at::ScalarType dt, int64_t n,
                      const BenchConfig& cfg, double gemm, ShapeRates* rates, bool& reset_ok) {
  BenchRow row = row_of(m, "prefill", dt, n);
  time_calls(row, cfg, reset_ok, [&] { m.prefill(in.q, in.k, in.v); });
  row.note = *m.notice;
  finish_rates(row, m.prefill_flops ? m.prefill_flops(n) : 0, static_cast<double>(in.q.size(0) * n),
               gemm);
  if (rates && m.prefill_gemms && row.ms_median > 0)
    row.own_gemm_fraction = ideal_gemm_ms(m.prefill_gemms(n), *rates) / row.ms_median;
  if (m.state_bytes) row.state_bytes = m.state_bytes(n, dt);
  return row;
}

constexpr int k_warm_steps = 4;  // untimed decode steps before the timed ones

// One token's inputs (step i of tok) for a decoder.
struct StepInputs {
  at::Tensor q, k, v;
};
StepInputs step_inputs(const Inputs& tok, int i) {
  return {tok.q.select(2, i).contiguous(), tok.k.select(2, i).contiguous(),
          tok.v.select(2, i).contiguous()};
}

// A decode row's fields once its per-token times are in.
BenchRow decode_row(const BenchMethod& m, const BenchShape& s, at::ScalarType dt, int64_t n,
                    const std::vector<double>& ms, const BenchDecoder& dec, double gemm) {
  BenchRow row = row_of(m, "decode", dt, n);
  fill_times(row, ms);
  row.note = *m.notice;
  finish_rates(row, m.decode_flops ? m.decode_flops(n) : 0, static_cast<double>(s.batch), gemm);
  row.state_bytes = dec.state_bytes();
  return row;
}

// A decoder primed with the N context tokens every method gets (untimed).
std::unique_ptr<BenchDecoder> primed_decoder(BenchMethod& m, const BenchShape& s,
                                             at::ScalarType dt, int64_t n, int steps) {
  auto dec = m.decoder(dt, n + k_warm_steps + steps);
  const Inputs ctx = make_inputs(s, n, dt, s.seed + 1);
  dec->prime(ctx.q, ctx.k, ctx.v);
  return dec;
}

BenchRow time_decode(BenchMethod& m, const BenchShape& s, at::ScalarType dt, int64_t n,
                     const BenchConfig& cfg, double gemm, bool& reset_ok) {
  const int steps = cfg.decode_steps;
  auto dec = primed_decoder(m, s, dt, n, steps);
  const Inputs tok = make_inputs(s, k_warm_steps + steps, dt, s.seed + 2);
  at::Tensor y = at::empty({s.batch, s.q_heads, s.value_dim});
  MemProbe probe;
  std::vector<double> ms;
  for (int i = 0; i < k_warm_steps + steps; ++i) {
    const StepInputs in = step_inputs(tok, i);
    if (i == k_warm_steps) {
      probe.start();
      reset_ok = reset_ok && probe.reset_ok();
    }
    const auto t0 = Clock::now();
    dec->step(in.q, in.k, in.v, y);
    const double t = ms_since(t0);
    if (i >= k_warm_steps) ms.push_back(t);
  }
  BenchRow row = decode_row(m, s, dt, n, ms, *dec, gemm);
  record_memory(row, probe);
  return row;
}

// Every method's decoder at context N, stepped in turn (token i of each method before
// token i + 1 of any): a slow spell of the machine falls on all of them alike, so their
// medians compare where a noisy VM makes cells taken one after another drift apart.
// Peak memory is not separable per method here and is left 0 (the note says so).
std::vector<BenchRow> time_decode_interleaved(const std::vector<BenchMethod*>& methods,
                                              const BenchShape& s, at::ScalarType dt, int64_t n,
                                              const BenchConfig& cfg, double gemm) {
  const int steps = cfg.decode_steps;
  std::vector<std::unique_ptr<BenchDecoder>> decs;
  for (BenchMethod* m : methods) decs.push_back(primed_decoder(*m, s, dt, n, steps));
  const Inputs tok = make_inputs(s, k_warm_steps + steps, dt, s.seed + 2);
  at::Tensor y = at::empty({s.batch, s.q_heads, s.value_dim});
  std::vector<std::vector<double>> ms(methods.size());
  for (int i = 0; i < k_warm_steps + steps; ++i) {
    const StepInputs in = step_inputs(tok, i);
    for (size_t j = 0; j < decs.size(); ++j) {
      const auto t0 = Clock::now();
      decs[j]->step(in.q, in.k, in.v, y);
      const double t = ms_since(t0);
      if (i >= k_warm_steps) ms[j].push_back(t);
    }
  }
  std::vector<BenchRow> rows;
  for (size_t j = 0; j < decs.size(); ++j) {
    rows.push_back(decode_row(*methods[j], s, dt, n, ms[j], *decs[j], gemm));
    BenchRow& r = rows.back();
    r.note = r.note.empty() ? "interleaved (no peak memory)"
                            : r.note + "; interleaved (no peak memory)";
  }
  return rows;
}

// Forward and backward of one layer: q, k, v leaves of the cell's inputs, y weighted by a
// fixed seeded tensor, the gradients dropped after each call.
BenchRow time_train(BenchMethod& m, const Inputs& in, int64_t n, const BenchConfig& cfg,
                    bool& reset_ok) {
  BenchRow row = row_of(m, "train", at::kFloat, n);
  at::AutoGradMode grad(true);
  const at::Tensor q = in.q.detach().requires_grad_(true), k = in.k.detach().requires_grad_(true),
                   v = in.v.detach().requires_grad_(true);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(cfg.shape.seed + 1);
  const at::Tensor w = at::randn({in.q.size(0), in.q.size(1), n, in.v.size(3)}, gen);
  time_calls(row, cfg, reset_ok, [&] {
    (m.train(q, k, v) * w).sum().backward();
    for (const at::Tensor& t : {q, k, v}) t.mutable_grad().reset();
  });
  row.tokens_per_s = static_cast<double>(in.q.size(0) * n) / (row.ms_median * 1e-3);
  return row;
}

void validate(const BenchConfig& c) {
  check(!c.methods.empty(), "bench", "expected at least one method");
  check(!c.lengths.empty(), "bench", "expected at least one sequence length");
  for (int64_t n : c.lengths) check(n >= 1, "bench", "sequence length {}: expected >= 1", n);
  check(c.repeats >= 1, "bench", "repeats: expected >= 1, got {}", c.repeats);
  check(c.warmup >= 0, "bench", "warmup: expected >= 0, got {}", c.warmup);
  check(c.decode_steps >= 1, "bench", "decode steps: expected >= 1, got {}", c.decode_steps);
  check(c.prefill || c.decode || c.train, "bench", "expected prefill, decode or train mode");
  check(!c.train || std::find(c.dtypes.begin(), c.dtypes.end(), at::kFloat) != c.dtypes.end(),
        "bench", "train mode runs fp32 only: add fp32 to --dtype");
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
         static_cast<double>(simd::oal_feature_dim(s.dim)) * (s.value_dim + 1.0);
}

BenchReport run_bench(const BenchConfig& cfg, const ProgressFn& progress) {
  validate(cfg);
  at::NoGradGuard no_grad;
  BenchReport rep;
  rep.config = cfg;
  rep.machine = machine_info();
  rep.isa = simd::target_name(simd::active_target());
  std::vector<BenchMethod> methods;
  for (const auto& name : cfg.methods) methods.push_back(make_bench_method(name, cfg.shape));
  if (cfg.measure_gemm) {
    rep.gemm_gflops_fp32 = aten_gemm_rate(at::kFloat);
    rep.gemm_gflops_bf16 = aten_gemm_rate(at::kBFloat16);
    rep.gemm_gflops_simd = simd_gemm_rate();
    rep.gemm_backends = gemm_backend_rates();
  }
  const double gemm_ref = std::max(rep.gemm_gflops_fp32, rep.gemm_gflops_simd);
  ShapeRates shape_rates;  // measured on first use, only when GEMM rates are measured
  ShapeRates* rates = cfg.measure_gemm ? &shape_rates : nullptr;
  const int64_t modes = (cfg.prefill ? 1 : 0) + (cfg.decode ? 1 : 0);
  const int64_t cells = static_cast<int64_t>(cfg.lengths.size() * methods.size());
  const int64_t total = modes * static_cast<int64_t>(cfg.dtypes.size()) * cells +
                        (cfg.train ? cells : 0);  // train: fp32 only
  int64_t done = 0;
  auto tick = [&](const BenchRow& r) {
    rep.rows.push_back(r);
    report(progress, ++done, total, "cells",
           fmt::format("{} {} {} N={}", r.method, r.mode, r.dtype, r.n));
  };
  std::vector<int64_t> lengths = cfg.lengths;
  std::sort(lengths.begin(), lengths.end());
  for (auto dt : cfg.dtypes) {
    if (cfg.train && dt == at::kFloat) {
      for (int64_t n : lengths) {
        const Inputs in = make_inputs(cfg.shape, n, at::kFloat, cfg.shape.seed);
        for (BenchMethod& m : methods) {
          if (!m.train)
            tick(skipped_row(m, "train", dt, n, "no training path"));
          else
            tick(time_train(m, in, n, cfg, rep.memory_reset_ok));
        }
      }
    }
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
            BenchRow r = time_prefill(m, in, dt, n, cfg, gemm_ref, rates, rep.memory_reset_ok);
            trend[mi] = {n, r.ms_median};
            tick(r);
          }
        }
      }
    }
    if (cfg.decode) {
      for (int64_t n : lengths) {
        std::vector<BenchMethod*> decoding;
        for (auto& m : methods) {
          if (!m.decoder)
            tick(skipped_row(m, "decode", dt, n, "no decode path"));
          else if (cfg.interleave_decode)
            decoding.push_back(&m);
          else
            tick(time_decode(m, cfg.shape, dt, n, cfg, gemm_ref, rep.memory_reset_ok));
        }
        if (!decoding.empty())
          for (BenchRow& r : time_decode_interleaved(decoding, cfg.shape, dt, n, cfg, gemm_ref))
            tick(r);
      }
    }
  }
  return rep;
}

// ---- output ---------------------------------------------------------------------------

}  // namespace oal::bench
