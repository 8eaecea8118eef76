#pragma once
// Subcommand registry of the `oal` CLI. Each tools/oal/cmd_*.cpp registers itself:
//
//   static oal::cli::Registrar reg{"ppl", "Perplexity of a model on a text file",
//                                  [](CLI::App& app) { ...add options...;
//                                                      return [=] { ...run...; }; }};
//
// setup() adds the command's options to `app` and returns the function to run after
// parsing. Commands are thin: parse, call the library, print. Errors are oal::Error
// exceptions; main() prints them as "error: ..." and exits with status 1.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace oal::cli {

using RunFn = std::function<void()>;
using SetupFn = std::function<RunFn(CLI::App&)>;

struct Command {
  std::string name;
  std::string description;
  SetupFn setup;
};

std::vector<Command>& registry();

struct Registrar {
  Registrar(std::string name, std::string description, SetupFn setup) {
    registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace oal::cli
