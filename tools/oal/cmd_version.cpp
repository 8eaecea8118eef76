// `oal version`: versions of oal and LibTorch, the BLAS in use and the thread count.
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <fmt/core.h>
#include <torch/version.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/core/machine.h"

namespace {

oal::cli::Registrar reg{"version", "Print oal, LibTorch and BLAS versions and thread count",
                        [](CLI::App& app) {
                          auto json = std::make_shared<bool>(false);
                          app.add_flag("--json", *json, "Machine-readable output");
                          return [json] {
                            const auto m = oal::machine_info();
                            nlohmann::json j;
                            j["oal"] = OAL_VERSION;
                            j["commit"] = m.commit;
                            j["libtorch"] = TORCH_VERSION;
                            j["threads"] = m.threads;
                            j["cpu"] = m.cpu;
                            j["blas"] = m.blas;
                            if (*json) {
                              fmt::print("{}\n", j.dump(2));
                              return;
                            }
                            fmt::print("oal {} (commit {})\n", OAL_VERSION, m.commit);
                            fmt::print("LibTorch {}\n", TORCH_VERSION);
                            fmt::print("BLAS {}\n", m.blas);
                            fmt::print("CPU {} ({} logical cores), {} threads\n", m.cpu,
                                       m.logical_cores, m.threads);
                          };
                        }};

}  // namespace
