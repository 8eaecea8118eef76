// `oal`: the command-line front end. Subcommands live in cmd_*.cpp (see command.h).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "command.h"
#include "oal/core/error.h"
#include "oal/core/machine.h"
#include "oal/simd/gemm_choice.h"
#include "oal/simd/isa.h"

namespace oal::cli {
std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace oal::cli

namespace {

// The commands whose results are fits (groups, coefficients, adapters) or statistics of
// them. Their big GEMMs use oal's own GEMM unless OAL_GEMM says otherwise: the automatic
// rule times own against BLAS once per process, the two round differently, and a fit
// amplifies rounding over its updates, so on a noisy machine the same command gave
// different coefficients from run to run. Pinned, a fit is reproducible for a given
// build, seed and SIMD target (docs/calibration.md).
void pin_gemm_for_fits(const std::map<CLI::App*, oal::cli::RunFn>& runs) {
  static const std::set<std::string> fits = {"analyze", "calibrate", "linearize", "fidelity",
                                             "diagnose", "finetune", "demo"};
  const char* env = std::getenv("OAL_GEMM");
  if (env != nullptr && *env != '\0') return;
  for (const auto& [sub, run] : runs)
    if (sub->parsed() && fits.count(sub->get_name()))
      oal::simd::set_gemm_policy(oal::simd::GemmPolicy::own);
}

// OAL_QUANT_DOT is the environment variable of --quant-dot (weights_option.h), read by
// the commands that build a model with it; a bad value is refused for every command, so
// a typo is never silently ignored.
void check_quant_dot_env() {
  const char* env = std::getenv("OAL_QUANT_DOT");
  if (env == nullptr || *env == '\0') return;
  const std::string_view v = env;
  oal::check(v == "dequant" || v == "int8", "linear_quant",
             "OAL_QUANT_DOT='{}': expected dequant or int8", v);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"oal — Outlier-Aware Attention Linearization toolkit"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");

  auto& commands = oal::cli::registry();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<CLI::App*, oal::cli::RunFn> runs;
  for (auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    runs[sub] = c.setup(*sub);
  }

  // An unknown first word is a mistyped command: name it and list the commands (CLI11
  // alone would answer "A subcommand is required").
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(),
                   [&](const auto& c) { return c.name == argv[1]; })) {
    std::string names;
    for (const auto& c : commands) {
      if (!names.empty()) names += ", ";
      names += c.name;
    }
    fmt::print(
        stderr,
        "error: unknown command '{}'; the commands are: {}\nRun 'oal --help' for what each does.\n",
        argv[1], names);
    return 2;
  }
  try {
    check_quant_dot_env();
  } catch (const oal::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    oal::configure_threads();
    oal::keep_freed_memory();
    // OAL_SIMD=avx2|avx512|... forces a SIMD target, OAL_GEMM=own|blas|auto a GEMM
    // backend (benchmarks of a lower target on a better CPU; docs/benchmarks.md).
    // (OAL_QUANT_DOT is --quant-dot's environment variable: the model options carry it.)
    oal::simd::apply_simd_env();
    oal::simd::apply_gemm_env();
    pin_gemm_for_fits(runs);
    for (auto& [sub, run] : runs)
      if (sub->parsed()) run();
  } catch (const oal::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
