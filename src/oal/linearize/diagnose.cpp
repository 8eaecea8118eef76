#include "oal/linearize/diagnose.h"

#include <fmt/format.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>

#include "oal/analysis/contribution.h"
#include "oal/attention/baselines/feature_linear.h"
#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/baselines/random_draws.h"
#include "oal/attention/registry.h"
#include "oal/calib/fit.h"
#include "oal/core/blas_threads.h"
#include "oal/core/error.h"

namespace oal::linearize {
namespace {

constexpr std::string_view k_op = "diagnose";

// Per-head 0/1 masks [Hq, D] of the subsets.
at::Tensor subset_masks(const std::vector<std::vector<int64_t>>& subsets, int64_t D) {
  at::Tensor m = at::zeros({int64_t(subsets.size()), D}, at::kDouble);
  for (size_t h = 0; h < subsets.size(); ++h)
    for (int64_t r : subsets[h]) m[h][r] = 1.0;
  return m;
}

// The evaluation of one (layer, sequence): expanded q, k, v and sampled positions.
struct Case {
  at::Tensor q, k, v, y;  // [1, Hq, T, D], y [1, Hq, P, Dv] softmax at positions
  std::vector<int64_t> pos;
};

// Output MSE at the positions of method `m` with per-head masks (undefined = full head).
double case_mse(const attn::FeatureMapMethod& m, const Case& c, const at::Tensor& mask) {
  const double inv = 1.0 / std::sqrt(double(c.q.size(3)));
  at::Tensor lk;
  if (!mask.defined()) {
    lk = m.log_kernel(c.q, c.k, c.pos);
  } else {
    at::Tensor ms = mask.unsqueeze(0).unsqueeze(2).to(c.q.scalar_type());  // [1, Hq, 1, D]
    at::Tensor qs = c.q * ms, ks = c.k * ms, qc = c.q * (1 - ms), kc = c.k * (1 - ms);
    at::Tensor rows = at::tensor(c.pos, at::kLong);
    at::Tensor exact = at::matmul(qc.index_select(2, rows), kc.transpose(-1, -2)) * inv;
    lk = m.log_kernel(qs, ks, c.pos) + exact.to(at::kDouble);
  }
  at::Tensor y = attn::log_kernel_attention(lk.to(at::kDouble), c.v.to(at::kDouble), c.pos);
  return (y - c.y.to(at::kDouble)).pow(2).mean().item<double>();
}

std::vector<Case> make_cases(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             int64_t positions, uint64_t seed, int64_t layer) {
  std::vector<Case> cases;
  const int64_t Hq = q.size(1), T = q.size(2);
  for (int64_t b = 0; b < q.size(0); ++b) {
    Case c;
    c.q = q.narrow(0, b, 1).to(at::kDouble);
    c.k = attn::expand_kv_heads(k.narrow(0, b, 1).to(at::kDouble), Hq);
    c.v = attn::expand_kv_heads(v.narrow(0, b, 1).to(at::kDouble), Hq);
    uint64_t rng = attn::derive_seed(seed, {layer, b, 0x905});
    c.pos = calib::sample_positions(T, positions, rng);
    at::Tensor lk = at::matmul(c.q.index_select(2, at::tensor(c.pos, at::kLong)),
                               c.k.transpose(-1, -2)) / std::sqrt(double(c.q.size(3)));
    c.y = attn::log_kernel_attention(lk, c.v, c.pos);
    cases.push_back(std::move(c));
  }
  return cases;
}

// Methods for every seed of one layer (keys expanded: Hkv = Hq).
std::vector<std::shared_ptr<attn::FeatureMapMethod>> seed_methods(const std::string& name,
                                                                  int64_t layer, int64_t Hq,
                                                                  int64_t D,
                                                                  const DiagnoseOptions& o) {
  std::vector<std::shared_ptr<attn::FeatureMapMethod>> out;
  const bool deterministic = !attn::method_spec(name).stochastic;
  for (uint64_t s : o.seeds) {
    auto m = std::dynamic_pointer_cast<attn::FeatureMapMethod>(
        attn::make_method(name, {layer, Hq, Hq, D}, s, nullptr));
    check(m != nullptr, k_op, "method '{}' is not a feature-map baseline", name);
    out.push_back(m);
    if (deterministic) break;
  }
  return out;
}

// R_S macro-averaged over layers and sequences for the given per-layer masks.
struct LayerEval {
  std::vector<Case> cases;
  std::vector<std::shared_ptr<attn::FeatureMapMethod>> methods;
  std::vector<double> full;  // E_full per case (seed-averaged)
};

double retained_ratio(const std::vector<LayerEval>& evals, const std::vector<at::Tensor>& masks) {
  double total = 0;
  int64_t n = 0;
  for (size_t l = 0; l < evals.size(); ++l) {
    const auto& e = evals[l];
    for (size_t c = 0; c < e.cases.size(); ++c) {
      double es = 0;
      for (const auto& m : e.methods) es += case_mse(*m, e.cases[c], masks[l]);
      es /= double(e.methods.size());
      total += e.full[c] > 0 ? es / e.full[c] : 0.0;
      ++n;
    }
  }
  return n ? total / double(n) : 0.0;
}

std::vector<LayerEval> prepare(const std::vector<DiagnoseLayer>& layers, const std::string& name,
                               const DiagnoseOptions& o,
                               const std::vector<at::Tensor>* qk_override) {
  std::vector<LayerEval> evals;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    const at::Tensor& q = qk_override ? (*qk_override)[2 * i] : l.q;
    const at::Tensor& k = qk_override ? (*qk_override)[2 * i + 1] : l.k;
    LayerEval e;
    e.cases = make_cases(q, k, l.v, o.positions, o.seed, l.layer);
    e.methods = seed_methods(name, l.layer, q.size(1), q.size(3), o);
    for (const auto& c : e.cases) {
      double full = 0;
      for (const auto& m : e.methods) full += case_mse(*m, c, at::Tensor());
      e.full.push_back(full / double(e.methods.size()));
    }
    evals.push_back(std::move(e));
  }
  return evals;
}

std::vector<std::vector<int64_t>> non_bulk(
    const std::vector<std::vector<std::vector<int64_t>>>& groups) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& g : groups) {
    std::vector<int64_t> s;
    for (size_t i = 1; i < g.size(); ++i) s.insert(s.end(), g[i].begin(), g[i].end());
    out.push_back(s);
  }
  return out;
}

// Non-bulk subsets of the Gaussian control's grouping, from `prompts` fresh N(0, 1)
// prompts [1, Hq|Hkv, len, D] (calibration shape), per head. Returns [Hq] subsets.
std::vector<std::vector<int64_t>> gaussian_subsets(const DiagnoseLayer& l,
                                                   const DiagnoseOptions& o) {
  const int64_t hq = l.q.size(1), hkv = l.k.size(1), d = l.q.size(3);
  const int64_t len = o.gaussian_prompt_len > 0 ? o.gaussian_prompt_len : l.q.size(2);
  std::vector<at::Tensor> signed_rows, mag_rows;  // [Hq, D] per prompt
  for (int64_t p = 0; p < o.gaussian_prompts; ++p) {
    at::Tensor q =
        attn::seeded_normal({1, hq, len, d}, attn::derive_seed(o.seed, {l.layer, 0x6c, p}));
    at::Tensor k =
        attn::seeded_normal({1, hkv, len, d}, attn::derive_seed(o.seed, {l.layer, 0x6d, p}));
    signed_rows.push_back(analysis::contribution_scores(q, k)[0]);
    mag_rows.push_back(analysis::contribution_magnitudes(q, k)[0]);
  }
  const at::Tensor s = at::stack(signed_rows, 0), m = at::stack(mag_rows, 0);  // [P, Hq, D]
  std::vector<std::vector<int64_t>> subsets;
  for (int64_t h = 0; h < hq; ++h) {
    const at::Tensor sh = s.select(1, h).contiguous(), mh = m.select(1, h).contiguous();
    auto g =
        analysis::group_dimensions(analysis::statistic_rows(o.grouping.chi, sh, mh), o.grouping);
    subsets.push_back(non_bulk({g.groups})[0]);
  }
  return subsets;
}

// Gaussian control: N(0, 1) q, k of the evaluation shape, masked by the subsets of the
// grouping procedure on separate Gaussian data of calibration shape.
std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> gaussian_inputs(
    const std::vector<DiagnoseLayer>& layers, const DiagnoseOptions& o) {
  std::vector<at::Tensor> qk, masks;
  for (const auto& l : layers) {
    at::Tensor q = attn::seeded_normal(l.q.sizes(), attn::derive_seed(o.seed, {l.layer, 0x6a}));
    at::Tensor k = attn::seeded_normal(l.k.sizes(), attn::derive_seed(o.seed, {l.layer, 0x6b}));
    qk.push_back(q);
    qk.push_back(k);
    masks.push_back(subset_masks(gaussian_subsets(l, o), q.size(3)));
  }
  return {qk, masks};
}

// One matched control: per layer and head, |S_h| dimensions drawn uniformly without
// replacement from that head's bulk (group 0), as masks [Hq, D] per layer.
std::vector<at::Tensor> control_masks(const std::vector<DiagnoseLayer>& layers, uint64_t& rng) {
  std::vector<at::Tensor> control;
  for (const auto& l : layers) {
    std::vector<std::vector<int64_t>> subsets;
    for (const auto& g : l.groups) {
      const int64_t need = int64_t(std::accumulate(g.begin() + 1, g.end(), size_t(0),
          [](size_t a, const std::vector<int64_t>& x) { return a + x.size(); }));
      const std::vector<int64_t>& bulk = g[0];
      check(need <= int64_t(bulk.size()), k_op, "layer {}: subset larger than the bulk", l.layer);
      std::vector<int64_t> s;
      for (int64_t i : calib::sample_positions(int64_t(bulk.size()), need, rng))
        s.push_back(bulk[i]);
      subsets.push_back(s);
    }
    control.push_back(subset_masks(subsets, l.q.size(3)));
  }
  return control;
}

}  // namespace

DiagnoseResult diagnose(const std::vector<DiagnoseLayer>& layers, const DiagnoseOptions& o) {
  check(!layers.empty(), k_op, "need at least one layer");
  check(!o.gaussian || o.gaussian_prompts >= 2, k_op,
        "gaussian prompts {}: expected at least 2 for the grouping's bootstrap",
        o.gaussian_prompts);
  check(o.positions > 0 && !o.seeds.empty() && o.controls >= 0, k_op,
        "positions ({}) > 0, at least one seed and controls ({}) >= 0 expected", o.positions,
        o.controls);
  at::NoGradGuard no_grad;
  const ScopedSingleThreadBlas one_blas_thread;  // small GEMMs, parallel controls
  DiagnoseResult r;
  std::vector<at::Tensor> masks;
  for (const auto& l : layers) {
    check(int64_t(l.groups.size()) == l.q.size(1), k_op, "layer {}: {} head groupings for {} heads",
          l.layer, l.groups.size(), l.q.size(1));
    auto subsets = non_bulk(l.groups);
    for (const auto& s : subsets) r.subset_dims += int64_t(s.size());
    r.total_dims += l.q.size(1) * l.q.size(3);
    masks.push_back(subset_masks(subsets, l.q.size(3)));
  }
  std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> gauss;
  if (o.gaussian) gauss = gaussian_inputs(layers, o);
  int64_t done = 0;
  for (const auto& name : o.methods) {
    DiagnoseRow row;
    row.method = name;
    auto evals = prepare(layers, name, o, nullptr);
    row.retained = retained_ratio(evals, masks);
    row.gaussian = std::nan("");
    if (o.gaussian)
      row.gaussian = retained_ratio(prepare(layers, name, o, &gauss.first), gauss.second);
    row.p_value = std::nan("");
    if (o.controls > 0) {
      // Controls drawn in order from one stream (reproducible), then evaluated in
      // parallel: each is independent, and ATen ops inside a parallel region run
      // single-threaded.
      uint64_t rng = attn::derive_seed(o.seed, {0xc0, int64_t(done)});
      std::vector<std::vector<at::Tensor>> controls;
      for (int64_t b = 0; b < o.controls; ++b) controls.push_back(control_masks(layers, rng));
      std::vector<char> exceeds(controls.size(), 0);
      std::atomic<int64_t> finished{0};
      const int64_t base = done * o.controls, total = int64_t(o.methods.size()) * o.controls;
      at::parallel_for(0, o.controls, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          exceeds[b] = retained_ratio(evals, controls[b]) >= row.retained;
          const int64_t f = ++finished;
          // Progress from the calling thread only (ProgressFn's contract).
          if (at::get_thread_num() == 0) report(o.progress, base + f, total, "controls", name);
        }
      });
      row.exceed = std::count(exceeds.begin(), exceeds.end(), char(1));
      row.controls = o.controls;
      row.p_value = double(1 + row.exceed) / double(o.controls + 1);
    }
    ++done;
    report(o.progress, o.controls > 0 ? done * o.controls : done,
           int64_t(o.methods.size()) * std::max<int64_t>(o.controls, 1),
           o.controls > 0 ? "controls" : "methods", name);
    r.rows.push_back(row);
  }
  return r;
}

nlohmann::json diagnose_json(const DiagnoseResult& r) {
  auto num = [](double x) { return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x); };
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows)
    rows.push_back({{"method", row.method}, {"retained_ratio", row.retained},
                    {"gaussian_ratio", num(row.gaussian)}, {"p_value", num(row.p_value)},
                    {"controls_exceeding", row.exceed}, {"controls", row.controls}});
  return {{"subset_dims", r.subset_dims}, {"total_dims", r.total_dims},
          {"subset_fraction", r.total_dims ? double(r.subset_dims) / double(r.total_dims) : 0.0},
          {"rows", rows}};
}

std::string diagnose_table(const DiagnoseResult& r) {
  std::string s = fmt::format("High-contribution subsets: {} of {} head dims ({:.1f}%)\n",
                              r.subset_dims, r.total_dims,
                              r.total_dims ? 100.0 * r.subset_dims / r.total_dims : 0.0);
  s += fmt::format("{:<14} {:>16} {:>18} {:>10}\n", "method", "high-contrib. %", "Gaussian ctrl %",
                   "p-value");
  for (const auto& row : r.rows)
    s += fmt::format("{:<14} {:>16.1f} {:>18.1f} {:>10.4g}\n", row.method, 100 * row.retained,
                     100 * row.gaussian, row.p_value);
  return s;
}

}  // namespace oal::linearize
