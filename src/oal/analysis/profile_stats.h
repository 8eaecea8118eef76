#pragma once
// Statistics of one contribution profile (a vector of d per-dimension scores):
// orderings, top-k shares and agreement between two profiles (paper App. A).
#include <cstdint>
#include <vector>

namespace oal::analysis {

// Dimension indices sorted by ascending score with a stable sort: equal scores keep
// index order (App. B's π). values [d] → permutation [d].
std::vector<int64_t> ascending_order(const std::vector<double>& values);

// The k dimensions with the largest scores, largest first; among equal scores the
// lower index comes first. Requires 1 <= k <= d.
std::vector<int64_t> top_k_dims(const std::vector<double>& values, int64_t k);

// Σ_{r ∈ dims} values[r] / Σ_r values[r]. Expects non-negative values with a positive
// total (magnitudes), else oal::Error.
double share_of(const std::vector<double>& values, const std::vector<int64_t>& dims);

// Share of the k largest entries: share_of(values, top_k_dims(values, k)).
double top_k_share(const std::vector<double>& values, int64_t k);

// Spearman rank correlation with average ranks for ties (Pearson correlation of the
// ranks). Both [d], d >= 2; returns 0 when a ranking is constant (no order to agree on).
double spearman_rho(const std::vector<double>& a, const std::vector<double>& b);

// |top_k(a) ∩ top_k(b)|.
int64_t top_k_overlap(const std::vector<double>& a, const std::vector<double>& b, int64_t k);

// Average ranks (1-based, ties share the mean of their positions). values [d] → [d].
std::vector<double> average_ranks(const std::vector<double>& values);

}  // namespace oal::analysis
