// `oal group`: App. B grouping of every head in an analysis.json (or the fixed-budget
// variant), written as Taylor-initialised kernels in the kernel JSON format.
#include <fmt/core.h>

#include "command.h"
#include "grouping_options.h"
#include "oal/analysis/analysis_json.h"
#include "oal/analysis/layer_groups.h"
#include "oal/attention/oal/kernel_json.h"
#include "oal/core/error.h"
#include "progress_bar.h"

namespace {

namespace oa = oal::analysis;

struct GroupArgs {
  std::string analysis, out;
  oa::GroupingOptions options;
  int64_t budget = 0;
  double kernel_eps = oal::attn::k_default_eps;
  bool json = false, quiet = false;
};

void run(const GroupArgs& a) {
  const oa::AnalysisResult r = oa::read_analysis(a.analysis);
  std::vector<oa::LayerGroups> groups;
  {
    oal::cli::ProgressBar bar("group", !a.quiet);
    groups = oa::group_analysis(r, a.options, a.budget, bar.fn());
  }
  const nlohmann::json meta = {{"source", "oal group"},
                               {"model", r.model},
                               {"analysis", a.analysis},
                               {"init", "taylor: 1 + s + s^2/2 embedded into the groups"}};
  oal::attn::write_kernels(
      a.out, oa::grouped_kernels(groups, r.head_dim, a.options, a.budget, meta, a.kernel_eps));
  if (a.json) {
    nlohmann::json summary = oa::groups_summary_json(groups, a.options, a.budget);
    summary["out"] = a.out;
    fmt::print("{}\n", summary.dump(2));
    return;
  }
  fmt::print("contribution statistic: {}\n{}", oa::chi_statistic_name(a.options.chi),
             oa::groups_summary_table(groups));
  fmt::print("wrote {} (Taylor-initialised kernels, {} layers)\n", a.out, groups.size());
}

oal::cli::Registrar reg{
    "group", "Group head dimensions by contribution (paper App. B) and write kernel JSON",
    [](CLI::App& app) {
      auto a = std::make_shared<GroupArgs>();
      app.add_option("--analysis", a->analysis, "analysis.json written by `oal analyze`")
          ->required();
      app.add_option("--out", a->out, "Output kernel JSON")->required();
      oal::cli::add_grouping_options(app, a->options);
      app.add_option("--budget", a->budget,
                     "Fixed budget G: cut the G-1 largest adjacent gaps (Fig. 2b) instead")
          ->capture_default_str();
      app.add_option("--kernel-eps", a->kernel_eps, "eps of the written kernels")
          ->capture_default_str();
      app.add_flag("--json", a->json, "Machine-readable summary on stdout");
      app.add_flag("--quiet", a->quiet, "No progress bar");
      return [a] { run(*a); };
    }};

}  // namespace
