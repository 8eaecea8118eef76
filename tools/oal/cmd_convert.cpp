// `oal convert`: write a converted model directory (chosen layers running a calibrated
// attention method, no training) that `oal ppl` / `oal generate` / `oal eval` load.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/train/pipeline.h"

namespace {

struct ConvertArgs {
  oal::train::ConvertOptions o;
  std::string calib, tokenizer, out;
  bool json = false;
};

void run(ConvertArgs& a) {
  a.o.calib = a.calib;
  a.o.tokenizer = a.tokenizer;
  a.o.out = a.out;
  const auto r = oal::train::run_convert(a.o);
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"method", r.method}, {"layers", r.layers},
                                      {"out", r.out.string()}}.dump(2));
    return;
  }
  fmt::print("converted layers [{}] to {}; written to {}\n", fmt::join(r.layers, ","), r.method,
             r.out.string());
}

oal::cli::Registrar reg{
    "convert", "Write a hybrid model directory: layers replaced by a calibrated method",
    [](CLI::App& app) {
      auto a = std::make_shared<ConvertArgs>();
      app.add_option("--model", a->o.model, "Source model (HF dir or llama2.c .bin)")->required();
      app.add_option("--calib", a->calib, "Calibration run directory (oal calibrate)");
      app.add_option("--method", a->o.method,
                     "oal | global | taylorshift | performer | dijiang | spectraformer | softmax")
          ->capture_default_str();
      app.add_option("--layers", a->o.layers, "'default' or a list such as 1-3")->capture_default_str();
      app.add_option("--out", a->out, "Output directory")->required();
      app.add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: beside the model)");
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
