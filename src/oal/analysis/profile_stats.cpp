#include "oal/analysis/profile_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "oal/core/error.h"

namespace oal::analysis {
namespace {
constexpr const char* k_op = "profile stats";
}

std::vector<int64_t> ascending_order(const std::vector<double>& values) {
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return values[a] < values[b]; });
  return order;
}

std::vector<int64_t> top_k_dims(const std::vector<double>& values, int64_t k) {
  const auto d = static_cast<int64_t>(values.size());
  check(k >= 1 && k <= d, k_op, "top-k: expected 1 <= k <= d = {}, got k = {}", d, k);
  std::vector<int64_t> order(values.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return values[a] > values[b]; });
  order.resize(static_cast<size_t>(k));
  return order;
}

double share_of(const std::vector<double>& values, const std::vector<int64_t>& dims) {
  double total = 0.0;
  for (double v : values) {
    check(std::isfinite(v) && v >= 0.0, k_op, "share: expected finite non-negative values, got {}",
          v);
    total += v;
  }
  check(total > 0.0, k_op, "share: expected a positive total, got {}", total);
  double part = 0.0;
  for (int64_t r : dims) {
    check(r >= 0 && r < static_cast<int64_t>(values.size()), k_op,
          "share: dimension {} outside [0, {})", r, values.size());
    part += values[static_cast<size_t>(r)];
  }
  return part / total;
}

double top_k_share(const std::vector<double>& values, int64_t k) {
  return share_of(values, top_k_dims(values, k));
}

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<int64_t> order = ascending_order(values);
  std::vector<double> ranks(values.size());
  size_t i = 0;
  while (i < order.size()) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double mean_rank = 0.5 * static_cast<double>(i + j) + 1.0;
    for (size_t t = i; t <= j; ++t) ranks[order[t]] = mean_rank;
    i = j + 1;
  }
  return ranks;
}

double spearman_rho(const std::vector<double>& a, const std::vector<double>& b) {
  check(a.size() == b.size() && a.size() >= 2, k_op,
        "spearman: expected two profiles of equal length >= 2, got {} and {}", a.size(),
        b.size());
  std::vector<double> ra = average_ranks(a), rb = average_ranks(b);
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1.0) / 2.0;  // ranks always average (n + 1) / 2
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0.0 || sbb == 0.0) return 0.0;
  return sab / std::sqrt(saa * sbb);
}

int64_t top_k_overlap(const std::vector<double>& a, const std::vector<double>& b, int64_t k) {
  std::vector<int64_t> ta = top_k_dims(a, k), tb = top_k_dims(b, k);
  int64_t n = 0;
  for (int64_t r : ta) n += std::count(tb.begin(), tb.end(), r) > 0 ? 1 : 0;
  return n;
}

}  // namespace oal::analysis
