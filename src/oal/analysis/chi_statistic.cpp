#include "oal/analysis/chi_statistic.h"

#include <cmath>

#include "oal/core/error.h"

namespace oal::analysis {

std::string chi_statistic_name(ChiStatistic s) {
  switch (s) {
    case ChiStatistic::mean_abs: return "mean-abs";
    case ChiStatistic::abs_mean: return "abs-mean";
    case ChiStatistic::signed_mean: return "signed";
  }
  fail("chi statistic", "unknown statistic {}", static_cast<int>(s));
}

ChiStatistic parse_chi_statistic(const std::string& name) {
  for (ChiStatistic s : {ChiStatistic::mean_abs, ChiStatistic::abs_mean, ChiStatistic::signed_mean})
    if (chi_statistic_name(s) == name) return s;
  fail("chi statistic", "'{}': expected mean-abs, abs-mean or signed", name);
}

bool chi_is_magnitude(ChiStatistic s) { return s != ChiStatistic::signed_mean; }

const at::Tensor& statistic_rows(ChiStatistic s, const at::Tensor& signed_rows,
                                 const at::Tensor& magnitude_rows) {
  const at::Tensor& rows = s == ChiStatistic::mean_abs ? magnitude_rows : signed_rows;
  check(rows.defined() && rows.dim() == 2 && rows.size(0) >= 1, "chi statistic",
        "{} needs per-prompt {} rows [P, d]; they are missing (an analysis.json written before "
        "--chi existed has only signed rows: re-run `oal analyze` or pass --chi signed)",
        chi_statistic_name(s), s == ChiStatistic::mean_abs ? "magnitude" : "signed");
  return rows;
}

std::vector<double> statistic_profile(ChiStatistic s, const std::vector<double>& signed_mean,
                                      const std::vector<double>& magnitude_mean) {
  if (s == ChiStatistic::signed_mean) return signed_mean;
  if (s == ChiStatistic::mean_abs) {
    check(!magnitude_mean.empty(), "chi statistic", "mean-abs: expected magnitudes, got none");
    return magnitude_mean;
  }
  std::vector<double> out;
  for (double v : signed_mean) out.push_back(std::abs(v));
  return out;
}

std::vector<double> profile_of_rows(ChiStatistic s, const at::Tensor& rows) {
  check(rows.defined() && rows.dim() == 2 && rows.size(0) >= 1, "chi statistic",
        "expected per-prompt rows [P, d] with P >= 1");
  at::Tensor mean = rows.to(at::kDouble).mean(0).contiguous();
  if (s == ChiStatistic::abs_mean) mean = mean.abs();
  return {mean.data_ptr<double>(), mean.data_ptr<double>() + mean.numel()};
}

}  // namespace oal::analysis
