#include "oal/demo/demo_operator.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <set>

#include "oal/attention/method_names.h"
#include "oal/attention/registry.h"
#include "oal/attention/softmax/softmax_method.h"
#include "oal/bench/bench.h"
#include "oal/calib/calibrate.h"
#include "oal/core/error.h"

namespace oal::demo {
namespace {

constexpr std::string_view k_op = "demo_operator";

struct Qkv {
  at::Tensor q, k, v;
};

// Synthetic Q/K/V (fp32) [n, H, T, D]: N(0, 1) everywhere, except the planted outlier
// dimensions where q has a large mean and k a large spread, so those few dims dominate
// the scores (the structure the paper finds in real models).
Qkv synthetic_qkv(const OperatorDemoOptions& o, int64_t sequences, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto opts = at::TensorOptions().dtype(at::kFloat);
  const int64_t n = sequences * o.batch, T = o.length;
  Qkv x;
  x.q = at::normal(0.0, 1.0, {n, o.q_heads, T, o.dim}, gen, opts);
  x.k = at::normal(0.0, 1.0, {n, o.kv_heads, T, o.dim}, gen, opts);
  x.v = at::normal(0.0, 1.0, {n, o.kv_heads, T, o.value_dim}, gen, opts);
  for (int64_t r : o.outlier_dims) {
    x.q.select(3, r).add_(o.outlier_q_mean);
    x.k.select(3, r).mul_(o.outlier_k_std);
  }
  return x;
}

void check_options(const OperatorDemoOptions& o) {
  check(o.batch >= 1 && o.q_heads >= 1 && o.kv_heads >= 1 && o.dim >= 2 && o.value_dim >= 1 &&
            o.length >= 2 && o.fit_sequences >= 1 && o.fit_steps >= 1 && o.chunk >= 1 &&
            o.repeats >= 1 && o.decode_steps >= 1 && !o.speed_lengths.empty(),
        k_op, "sizes must be positive (dim >= 2, length >= 2, at least one speed length)");
  check(o.q_heads % o.kv_heads == 0, k_op, "query heads ({}) must be a multiple of KV heads ({})",
        o.q_heads, o.kv_heads);
  std::set<int64_t> seen;
  for (int64_t r : o.outlier_dims)
    check(r >= 0 && r < o.dim && seen.insert(r).second, k_op,
          "outlier dims must be distinct and within 0..{}, got {}", o.dim - 1, r);
  check(int64_t(seen.size()) < o.dim, k_op, "the bulk group needs a dimension");
  for (int64_t n : o.speed_lengths) check(n >= 1, k_op, "speed lengths must be >= 1, got {}", n);
}

// Groups: bulk (every non-outlier dim) first, then one group per planted outlier dim.
std::vector<std::vector<int64_t>> planted_groups(const OperatorDemoOptions& o) {
  std::vector<std::vector<int64_t>> g(1);
  std::set<int64_t> out(o.outlier_dims.begin(), o.outlier_dims.end());
  for (int64_t r = 0; r < o.dim; ++r)
    if (!out.count(r)) g[0].push_back(r);
  for (int64_t r : o.outlier_dims) g.push_back({r});
  return g;
}

// OAL and the learned global kernel fitted exactly as `oal calibrate` fits them (three
// initialisations per head, best validation kept), on synthetic training sequences.
calib::CalibrationResult fit_kernels(const OperatorDemoOptions& o, const ProgressFn& progress) {
  const Qkv train = synthetic_qkv(o, o.fit_sequences, o.seed + 1);
  const Qkv val = synthetic_qkv(o, 1, o.seed + 2);
  const attn::SoftmaxAttention softmax;
  calib::LayerFitInput in{0, {train.q, train.k, train.v, softmax.forward(train.q, train.k, train.v),
                              val.q, val.k, val.v, softmax.forward(val.q, val.k, val.v)}};
  attn::ModelKernels groups;
  groups.head_dim = o.dim;
  groups.layers[0].assign(o.q_heads, attn::QuadraticKernel::taylor(planted_groups(o)));
  calib::CalibrationOptions co;
  co.methods = {attn::names::global, attn::names::oal};
  co.fit = calib::FitSettings::short_run(o.fit_steps);
  co.seed = o.seed;
  co.progress = progress;
  return calib::calibrate({in}, &groups, co);
}

struct Row {
  std::string name, method, groups, fitted;
  double rel_mse = 0;
};

// Median prefill ms, decode ms/token, state bytes and path of one bench method per length.
struct Speed {
  std::map<int64_t, bench::BenchRow> prefill, decode;
};

std::map<std::string, Speed> time_methods(const OperatorDemoOptions& o, int64_t groups,
                                          const ProgressFn& progress) {
  bench::BenchConfig c;
  c.methods = {"softmax-flash", attn::names::oal, attn::names::global};
  c.lengths = o.speed_lengths;
  c.dtypes = {at::kFloat};
  c.repeats = o.repeats;
  c.decode_steps = o.decode_steps;
  c.measure_gemm = false;
  c.shape = {o.batch,     o.q_heads, o.kv_heads, o.dim,
             o.value_dim, o.chunk,   groups,     static_cast<int64_t>(o.seed)};
  const bench::BenchReport rep = bench::run_bench(c, progress);
  std::map<std::string, Speed> out;
  for (const auto& r : rep.rows)
    (r.mode == "prefill" ? out[r.method].prefill : out[r.method].decode)[r.n] = r;
  return out;
}

std::string cell_ms(const bench::BenchRow* r) {
  if (!r) return "-";
  return r->skipped ? "skipped" : fmt::format("{:.1f}", r->ms_median);
}

}  // namespace

DemoSection operator_demo(const OperatorDemoOptions& o, const ProgressFn& progress) {
  check_options(o);
  const calib::CalibrationResult fitted = fit_kernels(o, progress);
  const Qkv eval_seq = synthetic_qkv(o, 1, o.seed);
  c10::NoGradGuard no_grad;
  const at::Tensor y_ref = attn::SoftmaxAttention().forward(eval_seq.q, eval_seq.k, eval_seq.v);
  const attn::MethodShape shape{0, o.q_heads, o.kv_heads, o.dim};
  const std::map<std::string, std::shared_ptr<attn::AttentionMethod>> methods = {
      {"OAL", fitted.layers[0].methods.at(attn::names::oal)},
      {"learned global (G = 1)", fitted.layers[0].methods.at(attn::names::global)},
      {"Taylor 1 + s + s²/2", attn::make_method(attn::names::global, shape, o.seed, nullptr)}};
  const std::string updates = fmt::format("calib::fit, {} updates x 3 inits", o.fit_steps);
  std::vector<Row> rows = {{"softmax (exact)", "softmax-flash", "-", "-", 0.0},
                           {"OAL", attn::names::oal,
                            fmt::format("bulk + {} outlier", o.outlier_dims.size()), updates, 0},
                           {"learned global (G = 1)", attn::names::global, "1", updates, 0},
                           {"Taylor 1 + s + s²/2", attn::names::global, "1", "no (init)", 0}};
  for (auto& r : rows)
    if (methods.count(r.name)) {
      const at::Tensor y = methods.at(r.name)->forward(eval_seq.q, eval_seq.k, eval_seq.v);
      r.rel_mse = (y - y_ref).square().sum().item<double>() / y_ref.square().sum().item<double>();
    }
  const auto speed = time_methods(o, int64_t(o.outlier_dims.size()) + 1, progress);

  DemoSection sec;
  sec.title = "Attention operator: exact softmax vs OAL vs learned global (synthetic Q/K/V)";
  const int64_t nmax = *std::max_element(o.speed_lengths.begin(), o.speed_lengths.end());
  sec.notes = {
      fmt::format("Synthetic data (not a model): B={} Hq={} Hkv={} d={} dv={}, fp32; planted "
                  "outlier dims {} (q ~ {} + N(0,1), k ~ N(0,{}²)), others N(0,1).",
                  o.batch, o.q_heads, o.kv_heads, o.dim, o.value_dim,
                  fmt::join(o.outlier_dims, ","), o.outlier_q_mean, o.outlier_k_std),
      fmt::format("Accuracy: kernels fitted by the calibration code (paper Eq. 20: Adam lr 0.02, "
                  "clip 10, 32 positions per update, three initialisations per head, best "
                  "validation kept) on {} training + 1 validation sequence of {} tokens; "
                  "RelMSE = ||Y - Y_softmax||² / ||Y_softmax||² on a separate {}-token sequence. "
                  "The Taylor row shares the global row's speed.",
                  o.fit_sequences, o.length, o.length),
      fmt::format(
          "Speed: `oal bench`'s runner (fp32, seeded random inputs: speed does not depend "
          "on the values), median of {} prefill calls after a warm-up and of {} decode "
          "steps at the given context; state = bytes the decoder holds after the decode timing "
          "at {} tokens of context (KV cache vs constant HD state). Reproduce: oal bench --methods "
          "softmax-flash,oal,global "
          "--dtype fp32 --n {} --heads {} --kv-heads {} --groups {}.",
          o.repeats, o.decode_steps, nmax, fmt::join(o.speed_lengths, ","), o.q_heads, o.kv_heads,
          o.outlier_dims.size() + 1)};
  sec.columns = {"method", "groups", "fitted", "RelMSE vs softmax"};
  for (int64_t n : o.speed_lengths) sec.columns.push_back(fmt::format("prefill ms N={}", n));
  sec.columns.push_back(fmt::format("decode ms/token N={}", nmax));
  sec.columns.push_back(fmt::format("state bytes N={}", nmax));
  sec.columns.push_back("path");
  nlohmann::json data = nlohmann::json::array();
  for (const auto& r : rows) {
    const Speed& s = speed.at(r.method);
    auto find = [](const std::map<int64_t, bench::BenchRow>& m, int64_t n) {
      auto it = m.find(n);
      return it == m.end() ? nullptr : &it->second;
    };
    std::vector<std::string> cells = {r.name, r.groups, r.fitted, fmt::format("{:.4g}", r.rel_mse)};
    nlohmann::json j = {{"method", r.name}, {"bench_method", r.method}, {"groups", r.groups},
                        {"fitted", r.fitted}, {"rel_mse", r.rel_mse}};
    for (int64_t n : o.speed_lengths) {
      cells.push_back(cell_ms(find(s.prefill, n)));
      if (const auto* p = find(s.prefill, n); p && !p->skipped)
        j["prefill_ms"][std::to_string(n)] = p->ms_median;
    }
    const auto* d = find(s.decode, nmax);
    cells.push_back(d && !d->skipped ? fmt::format("{:.3f}", d->ms_median) : "-");
    cells.push_back(d ? fmt::format("{}", d->state_bytes) : "-");
    const auto* p = find(s.prefill, nmax);
    cells.push_back(p ? p->note : "-");
    if (d) j["decode_ms_per_token"] = d->ms_median, j["state_bytes"] = d->state_bytes;
    if (p) j["path"] = p->note;
    sec.rows.push_back(cells);
    data.push_back(j);
  }
  sec.data = {{"synthetic", true},
              {"config",
               {{"batch", o.batch}, {"q_heads", o.q_heads}, {"kv_heads", o.kv_heads},
                {"dim", o.dim}, {"value_dim", o.value_dim}, {"length", o.length},
                {"outlier_dims", o.outlier_dims}, {"fit_sequences", o.fit_sequences},
                {"fit_steps", o.fit_steps}, {"chunk", o.chunk},
                {"speed_lengths", o.speed_lengths}, {"seed", o.seed}}},
              {"methods", data}};
  return sec;
}

}  // namespace oal::demo
