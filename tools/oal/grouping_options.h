#pragma once
// The App. B grouping options shared by `oal analyze` (figure colouring), `oal group`,
// `oal linearize` and `oal diagnose` (its Gaussian control), including --chi.
#include <CLI/CLI.hpp>

#include "oal/analysis/grouping.h"

namespace oal::cli {

inline void add_grouping_options(CLI::App& app, analysis::GroupingOptions& o) {
  app.add_option("--alpha", o.alpha, "Tail fraction: candidate cuts in the top ceil(alpha d)")
      ->capture_default_str();
  app.add_option("--tau", o.tau, "Gap-ratio / separation threshold")->capture_default_str();
  app.add_option("--gamma", o.gamma, "Minimum bootstrap support of a natural cut")
      ->capture_default_str();
  app.add_option("--gmin", o.g_min, "Minimum groups per head")->capture_default_str();
  app.add_option("--bootstrap", o.bootstrap, "Prompt-level bootstrap replicates B")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed (bootstrap; Gaussian control in analyze)")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--chi", [&o](const std::string& name) { o.chi = analysis::parse_chi_statistic(name); },
         "Contribution statistic: mean-abs = mean over causal pairs of |q_r k_r|/sqrt(d) "
         "(paper App. B / Fig. 5), abs-mean = |signed mean|, signed = Eq. 2 as printed")
      ->check(CLI::IsMember({"mean-abs", "abs-mean", "signed"}))
      ->default_str(analysis::chi_statistic_name(o.chi));
  app.add_option("--eps", o.eps, "Numerical floor in the gap and separation ratios")
      ->capture_default_str();
}

}  // namespace oal::cli
