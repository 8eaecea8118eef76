#pragma once
// Contribution-based dimension grouping (paper §4.2, App. B).
//
// Sort χ ascending (stable) → π. Candidate cuts k ∈ {max(1, d - m), ..., d - 1} with
// m = ceil(α d); cut k splits L_k = {π_1..π_k} (1-based) from U_k = {π_{k+1}..π_d}.
//   gap ratio      ρ_k = χ_{π_{k+1}} / max(χ_{π_k}, ε)                       (Eq. 16)
//   bootstrap      R_k^(b) = min_{U_k} χ^(b) / max(max_{L_k} χ^(b), ε)        (Eq. 17)
//   support        S_k = (1/B) Σ_b 1[R_k^(b) >= τ]                            (Eq. 18)
// Natural cuts: ρ_k >= τ and S_k >= γ. With fewer than G_min groups, unused candidates
// are added in descending (S_k, ρ_k) order (exact ties keep candidate order) until
// G_min groups exist. Groups follow the retained cuts in ascending order of
// contribution: group 0 is the low-contribution bulk (as in the authors' released
// JSON), the last group holds the largest contributions.
#include <ATen/ATen.h>

#include <cstdint>

#include "oal/analysis/chi_statistic.h"
#include <vector>

namespace oal::analysis {

struct GroupingOptions {
  double alpha = 0.25;      // tail fraction, (0, 1]
  double tau = 1.5;         // separation threshold, > 0
  double gamma = 0.9;       // minimum bootstrap support, [0, 1]
  int64_t g_min = 2;        // minimum group count, >= 1
  int64_t bootstrap = 1000; // replicates B, >= 1
  uint64_t seed = 0;        // bootstrap seed (same seed → same index sets for every head)
  double eps = 1e-12;       // numerical floor of the denominators in ρ_k and R_k
  // Contribution statistic (chi_statistic.h). The per-prompt rows given to the grouping
  // are statistic_rows(chi, ...); for abs-mean the profile (full sample and every
  // bootstrap replicate) is |row mean|, otherwise the row mean.
  ChiStatistic chi = ChiStatistic::mean_abs;
};

// Throws oal::Error naming the offending option when one is out of range.
void validate(const GroupingOptions& options);

struct CandidateCut {
  int64_t k = 0;          // 1-based cut position in π (|L_k| = k)
  double rho = 0.0;       // ρ_k (fixed budget: the absolute gap χ_{π_{k+1}} - χ_{π_k})
  double support = 0.0;   // S_k (fixed budget: 0)
  bool natural = false;   // ρ_k >= τ and S_k >= γ
  bool chosen = false;    // retained (natural or fallback)
};

struct Grouping {
  std::vector<int64_t> order;                 // π, ascending contribution [d]
  std::vector<CandidateCut> candidates;       // in ascending k
  std::vector<int64_t> cuts;                  // retained k, ascending
  std::vector<std::vector<int64_t>> groups;   // groups[g] = dims (ascending index); 0 = bulk
  std::vector<int64_t> group_of;              // [d] → group index
  int64_t natural_cuts = 0;                   // how many retained cuts are natural
  int64_t num_groups() const { return static_cast<int64_t>(groups.size()); }
};

// Candidate cut positions {max(1, d - ceil(α d)), ..., d - 1}. d >= 2, α in (0, 1].
std::vector<int64_t> candidate_positions(int64_t d, double alpha);

// Gap ratios ρ_k for the given cut positions of the sorted profile. chi [d].
std::vector<double> gap_ratios(const std::vector<double>& chi, const std::vector<int64_t>& order,
                               const std::vector<int64_t>& positions, double eps);

// Bootstrap supports S_k. per_prompt [P, d] fp64 (row p = χ_{p,·}); `order` is π from the
// full sample and stays fixed; index_sets [B][P] from bootstrap_index_sets. abs_of_mean:
// each replicate's profile is |mean of its rows| (abs-mean) instead of the mean.
std::vector<double> bootstrap_supports(const at::Tensor& per_prompt,
                                       const std::vector<int64_t>& order,
                                       const std::vector<int64_t>& positions,
                                       const std::vector<std::vector<int64_t>>& index_sets,
                                       double tau, double eps, bool abs_of_mean = false);

// Marks natural cuts and adds fallback cuts (descending (S, ρ), ties in candidate order)
// until g_min groups. Fills `natural` and `chosen`; returns the retained k ascending.
std::vector<int64_t> select_cuts(std::vector<CandidateCut>& candidates, double tau, double gamma,
                                 int64_t g_min);

// Groups from an ordering and retained cuts (App. B Eq. 19), dims mapped back to indices.
void fill_groups(Grouping& grouping, const std::vector<int64_t>& cuts);

// The full App. B procedure for one (layer, head). per_prompt [P, d] (P >= 2), fp64 or
// fp32, = statistic_rows(options.chi, signed, magnitude); χ = profile_of_rows(options.chi,
// per_prompt).
Grouping group_dimensions(const at::Tensor& per_prompt, const GroupingOptions& options);

// Fixed-budget grouping (Fig. 2b): the G - 1 largest adjacent gaps χ_{π_{k+1}} - χ_{π_k}
// anywhere in the sorted profile, k = 1..d-1; equal gaps prefer the larger k (nearer the
// high-contribution tail). chi [d] (the statistic's profile), 1 <= budget <= d.
Grouping group_fixed_budget(const std::vector<double>& chi, int64_t budget);

}  // namespace oal::analysis
