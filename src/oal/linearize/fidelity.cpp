#include "oal/linearize/fidelity.h"

#include <fmt/format.h>

#include <cmath>

#include "oal/attention/softmax/softmax_method.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::linearize {
namespace {

constexpr std::string_view k_op = "fidelity";

// Squared error, reference energy and element count of one comparison.
struct Sums {
  double err = 0, energy = 0, n = 0;
  void add(const at::Tensor& y_hat, const at::Tensor& y) {
    at::Tensor d = y_hat.to(at::kDouble) - y.to(at::kDouble);
    err += d.pow(2).sum().item<double>();
    energy += y.to(at::kDouble).pow(2).sum().item<double>();
    n += double(y.numel());
  }
};

// Per-sequence sums, averaged into MSE / RelMSE over sequences.
struct SeqSums {
  std::vector<Sums> before, after;
  explicit SeqSums(int64_t n = 0) : before(n), after(n) {}
};

double mean_ratio(const std::vector<Sums>& s, bool relative) {
  double total = 0;
  for (const auto& x : s) {
    const double den = relative ? x.energy : x.n;
    total += den > 0 ? x.err / den : 0.0;
  }
  return s.empty() ? 0.0 : total / double(s.size());
}

FidelityScores scores(const SeqSums& s) {
  return {mean_ratio(s.before, false), mean_ratio(s.before, true), mean_ratio(s.after, false),
          mean_ratio(s.after, true)};
}

// [Hq, T, Dv] per-head outputs -> [T, hidden] after W_o.
at::Tensor project(const at::Tensor& y, const at::Tensor& wo) {
  at::Tensor cat = y.permute({1, 0, 2}).reshape({y.size(1), -1}).to(at::kFloat);
  return at::matmul(cat, wo.t());
}

}  // namespace

FidelityResult frozen_fidelity(const std::vector<FidelityLayer>& layers,
                               const std::vector<std::string>& methods,
                               const ProgressFn& progress) {
  check(!layers.empty() && !methods.empty(), k_op, "need at least one layer and one method");
  at::NoGradGuard no_grad;
  const int64_t N = layers[0].q.size(0);
  for (const auto& l : layers) {
    check(l.q.size(0) == N && l.k.size(0) == N && l.v.size(0) == N, k_op,
          "layer {}: every layer needs the same {} sequences", l.layer, N);
    check(l.wo.dim() == 2 && l.wo.size(1) == l.q.size(1) * l.v.size(3), k_op,
          "layer {}: W_o {} does not match {} heads x {} value dims", l.layer, shape_str(l.wo),
          l.q.size(1), l.v.size(3));
    for (const auto& m : methods)
      check(l.methods.count(m), k_op, "layer {}: method '{}' missing", l.layer, m);
  }
  const attn::SoftmaxAttention softmax;
  std::map<std::string, SeqSums> total;
  std::map<std::string, std::map<int64_t, SeqSums>> per_layer;
  std::map<std::string, std::map<std::pair<int64_t, int64_t>, SeqSums>> per_head;
  for (const auto& m : methods) total[m] = SeqSums(N);
  for (int64_t b = 0; b < N; ++b) {
    for (const auto& l : layers) {
      auto sl = [b](const at::Tensor& t) { return t.narrow(0, b, 1); };
      const at::Tensor y = softmax.forward(sl(l.q), sl(l.k), sl(l.v))[0];
      const at::Tensor y_wo = project(y, l.wo);
      for (const auto& m : methods) {
        const at::Tensor y_hat = l.methods.at(m)->forward(sl(l.q), sl(l.k), sl(l.v))[0];
        check(at::isfinite(y_hat).all().item<bool>(), k_op,
              "method '{}' produced a non-finite output on layer {}, sequence {}", m, l.layer, b);
        const at::Tensor yh_wo = project(y_hat, l.wo);
        total[m].before[b].add(y_hat, y);
        total[m].after[b].add(yh_wo, y_wo);
        auto& pl = per_layer[m][l.layer];
        if (pl.before.empty()) pl = SeqSums(N);
        pl.before[b].add(y_hat, y);
        pl.after[b].add(yh_wo, y_wo);
        for (int64_t h = 0; h < y.size(0); ++h) {
          auto& ph = per_head[m][{l.layer, h}];
          if (ph.before.empty()) ph = SeqSums(N);
          ph.before[b].add(y_hat[h], y[h]);
        }
      }
    }
    report(progress, b + 1, N, "sequences");
  }
  FidelityResult r;
  r.sequences = N;
  r.tokens_per_sequence = layers[0].q.size(2);
  for (const auto& m : methods) {
    FidelityRow row;
    row.method = m;
    row.all = scores(total[m]);
    for (const auto& [l, s] : per_layer[m]) row.layers[l] = scores(s);
    for (const auto& [lh, s] : per_head[m]) {
      FidelityScores sc = scores(s);
      sc.mse_after_wo = sc.relmse_after_wo = std::nan("");  // not defined per head
      row.heads[lh] = sc;
    }
    r.rows.push_back(std::move(row));
  }
  return r;
}

nlohmann::json fidelity_json(const FidelityResult& r) {
  auto sj = [](const FidelityScores& s, bool after) {
    nlohmann::json j{{"mse_before_wo", s.mse_before_wo}, {"relmse_before_wo", s.relmse_before_wo}};
    if (after) {
      j["mse_after_wo"] = s.mse_after_wo;
      j["relmse_after_wo"] = s.relmse_after_wo;
    }
    return j;
  };
  nlohmann::json j{{"sequences", r.sequences}, {"tokens", r.tokens_per_sequence}};
  nlohmann::json ms = nlohmann::json::object(), order = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json mj = sj(row.all, true);
    nlohmann::json lj = nlohmann::json::object();
    for (const auto& [l, s] : row.layers) lj[std::to_string(l)] = sj(s, true);
    mj["layers"] = lj;
    nlohmann::json hj = nlohmann::json::array();
    for (const auto& [lh, s] : row.heads) {
      nlohmann::json e = sj(s, false);
      e["layer"] = lh.first;
      e["head"] = lh.second;
      hj.push_back(e);
    }
    mj["heads"] = hj;
    ms[row.method] = mj;
    order.push_back(row.method);
  }
  j["methods"] = ms;
  j["order"] = order;
  return j;
}

std::string fidelity_table(const FidelityResult& r) {
  std::string s = fmt::format("{:<14} {:>14} {:>14} {:>14} {:>14}\n", "method",
                              "MSE before Wo", "RelMSE bef. Wo", "MSE after Wo", "RelMSE aft. Wo");
  for (const auto& row : r.rows)
    s += fmt::format("{:<14} {:>14.6g} {:>14.6g} {:>14.6g} {:>14.6g}\n", row.method,
                     row.all.mse_before_wo, row.all.relmse_before_wo, row.all.mse_after_wo,
                     row.all.relmse_after_wo);
  return s;
}

}  // namespace oal::linearize
