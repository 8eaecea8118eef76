#pragma once
// Which per-dimension contribution statistic drives the grouping and the analysis
// (paper Eq. 2, App. A/B). Three choices, all averaged over prompts with equal weight:
//
//   mean-abs (default)  A_r = mean over causal pairs of |q_ir k_jr| / sqrt(d)
//   abs-mean            |χ_r|, the absolute value of the signed prompt mean
//   signed              χ_r = mean over causal pairs of q_ir k_jr / sqrt(d) (Eq. 2 as printed)
//
// Why mean-abs is the default: App. B divides contribution scores (ρ_k = χ_{π(k+1)} /
// max(χ_{π(k)}, ε), "ε only avoids division by zero") and Fig. 5 reports a top-5 share of
// ≈ 7.8% ≈ 5/64 for i.i.d. N(0, 1) q, k at d = 64 with "the same statistic χ_r"; only a
// non-negative statistic with equal expectation per dimension gives that. The signed mean
// puts strongly negative dimensions into the bulk.
//
// Cost: |q_ir k_jr| = |q_ir| |k_jr|, so A_r is exact in O(N d) with the same prefix-sum
// trick as χ (contribution_magnitudes); no O(N² d) pass is needed.
#include <ATen/ATen.h>

#include <string>

namespace oal::analysis {

enum class ChiStatistic { mean_abs, abs_mean, signed_mean };

// "mean-abs", "abs-mean", "signed".
std::string chi_statistic_name(ChiStatistic statistic);

// Inverse of chi_statistic_name; throws oal::Error("[chi statistic] ...") naming the
// accepted values for anything else.
ChiStatistic parse_chi_statistic(const std::string& name);

// True when the statistic is non-negative (mean-abs, abs-mean): shares and normalised
// values are fractions of it.
bool chi_is_magnitude(ChiStatistic statistic);

// Per-prompt rows whose prompt mean gives the statistic (before the absolute value that
// abs-mean takes of the mean): magnitude rows for mean-abs, signed rows otherwise.
// signed_rows, magnitude_rows [P, d] → [P, d] (the chosen input, unchanged).
const at::Tensor& statistic_rows(ChiStatistic statistic, const at::Tensor& signed_rows,
                                 const at::Tensor& magnitude_rows);

// The statistic's profile from prompt means: mean-abs → magnitude_mean, abs-mean →
// |signed_mean|, signed → signed_mean. Both [d]; returns [d].
std::vector<double> statistic_profile(ChiStatistic statistic,
                                      const std::vector<double>& signed_mean,
                                      const std::vector<double>& magnitude_mean);

// Profile from the rows of statistic_rows: their mean, with |.| for abs-mean.
// rows [P, d] (P >= 1) → [d].
std::vector<double> profile_of_rows(ChiStatistic statistic, const at::Tensor& rows);

}  // namespace oal::analysis
