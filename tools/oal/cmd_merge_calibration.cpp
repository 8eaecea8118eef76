// `oal merge-calibration`: combine the partial runs of `oal calibrate --shard i/n` into
// one run directory (calib/run_merge.h).
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/calib/run_merge.h"

namespace {

struct MergeArgs {
  std::vector<std::string> parts;
  std::string out;
  bool json = false;
};

oal::cli::Registrar reg{
    "merge-calibration", "Combine the partial runs of `oal calibrate --shard i/n` into one run",
    [](CLI::App& app) {
      auto a = std::make_shared<MergeArgs>();
      app.add_option("parts", a->parts, "The n partial run directories (any order)")->required();
      app.add_option("--out", a->out, "Run directory to write")->required();
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] {
        std::vector<std::filesystem::path> dirs(a->parts.begin(), a->parts.end());
        oal::calib::merge_runs(dirs, a->out);
        if (a->json)
          fmt::print("{}\n", nlohmann::json{{"out", a->out}, {"parts", a->parts}}.dump(2));
        else
          fmt::print("merged {} partial runs into {}\n", a->parts.size(), a->out);
      };
    }};

}  // namespace
