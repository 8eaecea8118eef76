#include "oal/analysis/grouping.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "oal/analysis/bootstrap.h"
#include "oal/analysis/profile_stats.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::analysis {
namespace {

constexpr const char* k_op = "grouping";

}  // namespace

void validate(const GroupingOptions& o) {
  check(std::isfinite(o.alpha) && o.alpha > 0.0 && o.alpha <= 1.0, k_op,
        "alpha = {}: expected a tail fraction in (0, 1]", o.alpha);
  check(std::isfinite(o.tau) && o.tau > 0.0, k_op, "tau = {}: expected a positive threshold",
        o.tau);
  check(std::isfinite(o.gamma) && o.gamma >= 0.0 && o.gamma <= 1.0, k_op,
        "gamma = {}: expected a support fraction in [0, 1]", o.gamma);
  check(o.g_min >= 1, k_op, "g_min = {}: expected at least 1 group", o.g_min);
  check(o.bootstrap >= 1, k_op, "bootstrap = {}: expected at least 1 replicate", o.bootstrap);
  check(std::isfinite(o.eps) && o.eps > 0.0, k_op, "eps = {}: expected a positive constant",
        o.eps);
}

std::vector<int64_t> candidate_positions(int64_t d, double alpha) {
  check(d >= 2, k_op, "head dim {}: expected at least 2 dimensions to cut", d);
  check(alpha > 0.0 && alpha <= 1.0, k_op, "alpha = {}: expected (0, 1]", alpha);
  // ceil(α d) computed with a tiny tolerance so α d = 16.000000000000004 stays 16.
  const auto m = static_cast<int64_t>(std::ceil(alpha * static_cast<double>(d) - 1e-9));
  std::vector<int64_t> ks;
  for (int64_t k = std::max<int64_t>(1, d - m); k <= d - 1; ++k) ks.push_back(k);
  return ks;
}

std::vector<double> gap_ratios(const std::vector<double>& chi, const std::vector<int64_t>& order,
                               const std::vector<int64_t>& positions, double eps) {
  std::vector<double> rho;
  rho.reserve(positions.size());
  for (int64_t k : positions)  // 1-based k: π_k = order[k - 1], π_{k+1} = order[k]
    rho.push_back(chi[order[k]] / std::max(chi[order[k - 1]], eps));
  return rho;
}

std::vector<double> bootstrap_supports(const at::Tensor& per_prompt,
                                       const std::vector<int64_t>& order,
                                       const std::vector<int64_t>& positions,
                                       const std::vector<std::vector<int64_t>>& index_sets,
                                       double tau, double eps, bool abs_of_mean) {
  at::Tensor pp = per_prompt.to(at::kDouble).contiguous();
  const int64_t d = pp.size(1);
  const double* data = pp.data_ptr<double>();
  std::vector<int64_t> hits(positions.size(), 0);
  std::vector<double> chi_b(static_cast<size_t>(d)), prefix_max(static_cast<size_t>(d)),
      suffix_min(static_cast<size_t>(d));
  for (const auto& set : index_sets) {
    std::fill(chi_b.begin(), chi_b.end(), 0.0);
    for (int64_t p : set)
      for (int64_t r = 0; r < d; ++r) chi_b[r] += data[p * d + r];
    for (auto& v : chi_b) {
      v /= static_cast<double>(set.size());
      if (abs_of_mean) v = std::abs(v);
    }
    // Along the fixed full-sample order π: max over L_k and min over U_k.
    for (int64_t t = 0; t < d; ++t)
      prefix_max[t] = t ? std::max(prefix_max[t - 1], chi_b[order[t]]) : chi_b[order[t]];
    for (int64_t t = d - 1; t >= 0; --t)
      suffix_min[t] = t < d - 1 ? std::min(suffix_min[t + 1], chi_b[order[t]]) : chi_b[order[t]];
    for (size_t c = 0; c < positions.size(); ++c) {
      const int64_t k = positions[c];
      const double r = suffix_min[k] / std::max(prefix_max[k - 1], eps);
      if (r >= tau) ++hits[c];
    }
  }
  std::vector<double> support;
  for (int64_t h : hits)
    support.push_back(static_cast<double>(h) / static_cast<double>(index_sets.size()));
  return support;
}

std::vector<int64_t> select_cuts(std::vector<CandidateCut>& candidates, double tau, double gamma,
                                 int64_t g_min) {
  check(g_min <= static_cast<int64_t>(candidates.size()) + 1, k_op,
        "g_min = {} needs {} cuts but the tail has only {} candidate cuts (raise alpha or lower "
        "g_min)",
        g_min, g_min - 1, candidates.size());
  int64_t retained = 0;
  for (auto& c : candidates) {
    c.natural = c.rho >= tau && c.support >= gamma;
    c.chosen = c.natural;
    retained += c.natural ? 1 : 0;
  }
  // Fallback: descending (S, ρ); stable_sort keeps candidate order on exact ties.
  std::vector<size_t> fallback;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (!candidates[i].chosen) fallback.push_back(i);
  std::stable_sort(fallback.begin(), fallback.end(), [&](size_t a, size_t b) {
    if (candidates[a].support != candidates[b].support)
      return candidates[a].support > candidates[b].support;
    return candidates[a].rho > candidates[b].rho;
  });
  for (size_t i = 0; i < fallback.size() && retained + 1 < g_min; ++i, ++retained)
    candidates[fallback[i]].chosen = true;
  std::vector<int64_t> cuts;
  for (const auto& c : candidates)
    if (c.chosen) cuts.push_back(c.k);
  return cuts;
}

void fill_groups(Grouping& g, const std::vector<int64_t>& cuts) {
  const auto d = static_cast<int64_t>(g.order.size());
  g.cuts = cuts;
  g.groups.clear();
  g.group_of.assign(static_cast<size_t>(d), -1);
  int64_t begin = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const int64_t end = i < cuts.size() ? cuts[i] : d;
    check(end > begin && end <= d, k_op, "cuts must be strictly increasing in [1, {}]", d - 1);
    std::vector<int64_t> dims(g.order.begin() + begin, g.order.begin() + end);
    std::sort(dims.begin(), dims.end());
    for (int64_t r : dims) g.group_of[r] = static_cast<int64_t>(g.groups.size());
    g.groups.push_back(std::move(dims));
    begin = end;
  }
}

Grouping group_dimensions(const at::Tensor& per_prompt, const GroupingOptions& options) {
  validate(options);
  check_dim(per_prompt, 2, k_op, "per-prompt chi");
  check_floating(per_prompt, k_op, "per-prompt chi");
  check_finite(per_prompt, k_op, "per-prompt chi");
  check(per_prompt.size(0) >= 2, k_op,
        "per-prompt chi {}: expected at least 2 prompts for the prompt-level bootstrap",
        shape_str(per_prompt));
  const std::vector<double> chi = profile_of_rows(options.chi, per_prompt);
  Grouping g;
  g.order = ascending_order(chi);
  const std::vector<int64_t> ks = candidate_positions(per_prompt.size(1), options.alpha);
  const std::vector<double> rho = gap_ratios(chi, g.order, ks, options.eps);
  const auto sets = bootstrap_index_sets(per_prompt.size(0), options.bootstrap, options.seed);
  const std::vector<double> support =
      bootstrap_supports(per_prompt, g.order, ks, sets, options.tau, options.eps,
                         options.chi == ChiStatistic::abs_mean);
  for (size_t i = 0; i < ks.size(); ++i) g.candidates.push_back({ks[i], rho[i], support[i]});
  const std::vector<int64_t> cuts =
      select_cuts(g.candidates, options.tau, options.gamma, options.g_min);
  for (const auto& c : g.candidates) g.natural_cuts += c.chosen && c.natural ? 1 : 0;
  fill_groups(g, cuts);
  return g;
}

Grouping group_fixed_budget(const std::vector<double>& chi, int64_t budget) {
  const auto d = static_cast<int64_t>(chi.size());
  check(d >= 1 && budget >= 1 && budget <= d, k_op,
        "fixed budget G = {}: expected 1 <= G <= d = {}", budget, d);
  for (double v : chi) check(std::isfinite(v), k_op, "chi: expected finite values, got {}", v);
  Grouping g;
  g.order = ascending_order(chi);
  for (int64_t k = 1; k < d; ++k)
    g.candidates.push_back({k, chi[g.order[k]] - chi[g.order[k - 1]], 0.0});
  std::vector<size_t> idx(g.candidates.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    if (g.candidates[a].rho != g.candidates[b].rho)
      return g.candidates[a].rho > g.candidates[b].rho;
    return g.candidates[a].k > g.candidates[b].k;
  });
  std::vector<int64_t> cuts;
  for (int64_t i = 0; i < budget - 1; ++i) {
    g.candidates[idx[i]].chosen = true;
    cuts.push_back(g.candidates[idx[i]].k);
  }
  std::sort(cuts.begin(), cuts.end());
  fill_groups(g, cuts);
  return g;
}

}  // namespace oal::analysis
