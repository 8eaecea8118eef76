// `oal demo`: a short tour of what the toolkit does, section by section (see
// src/oal/demo/demo_report.h): the attention operator on synthetic data, the analysis
// and groups of the synthetic model, the frozen-attention fidelity table, and a short
// conversion + LoRA fine-tuning.
#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "command.h"
#include "oal/demo/demo_analysis.h"
#include "oal/demo/demo_fidelity.h"
#include "oal/demo/demo_operator.h"
#include "oal/demo/demo_report.h"
#include "oal/demo/demo_adapt.h"

namespace {

struct DemoArgs {
  oal::demo::OperatorDemoOptions op;
  bool json = false, quiet = false;
};

oal::cli::Registrar reg{
    "demo", "Tour: the operator (accuracy, speed at 1K and 16K), analysis, fidelity, adaptation",
    [](CLI::App& app) {
      auto a = std::make_shared<DemoArgs>();
      app.add_option("--n", a->op.length, "Fitting and accuracy sequence length")
          ->capture_default_str();
      app.add_option("--speed-n", a->op.speed_lengths, "Sequence lengths timed (prefill; decode at the longest)")
          ->capture_default_str();
      app.add_option("--heads", a->op.q_heads, "Query heads")->capture_default_str();
      app.add_option("--kv-heads", a->op.kv_heads, "Key/value heads")->capture_default_str();
      app.add_option("--dim", a->op.dim, "Head dimension d")->capture_default_str();
      app.add_option("--outliers", a->op.outlier_dims, "Planted outlier dimensions")
          ->capture_default_str();
      app.add_option("--fit-steps", a->op.fit_steps, "Fitter updates per kernel and initialisation")
          ->capture_default_str();
      app.add_option("--fit-sequences", a->op.fit_sequences, "Synthetic training sequences")
          ->capture_default_str();
      app.add_option("--chunk", a->op.chunk, "HD chunk size")->capture_default_str();
      app.add_option("--repeats", a->op.repeats, "Timed prefill calls (median)")->capture_default_str();
      app.add_option("--seed", a->op.seed, "Seed of the synthetic data")->capture_default_str();
      app.add_flag("--json", a->json, "Machine-readable output");
      app.add_flag("--quiet", a->quiet, "No progress bar");
      return [a] {
        oal::demo::DemoReport report;
        // One status line on stderr, rewritten in place as work completes.
        oal::ProgressFn progress;
        if (!a->quiet)
          progress = [](int64_t done, int64_t total, std::string_view what,
                        std::string_view detail) {
            fmt::print(stderr, "\r[demo] {} {}/{} {}   ", what, done, total, detail);
            if (done == total) fmt::print(stderr, "\n");
            std::fflush(stderr);
          };
        report.sections.push_back(oal::demo::operator_demo(a->op, progress));
        report.sections.push_back(oal::demo::analysis_demo({}, progress));
        // The fidelity section uses the real stories260K model; without ../shared/data
        // (a user's own machine) it says so instead of failing the whole tour.
        oal::demo::FidelityDemoOptions fid;
        if (std::filesystem::exists(fid.model) && std::filesystem::exists(fid.text)) {
          report.sections.push_back(oal::demo::fidelity_demo(fid, progress));
        } else {
          oal::demo::DemoSection skipped;
          skipped.title = "Frozen-attention fidelity (stories260K)";
          skipped.notes.push_back("skipped: " + fid.model + " or " + fid.text +
                                  " not found (run from the project root with ../shared/data)");
          report.sections.push_back(skipped);
        }
        report.sections.push_back(oal::demo::adapt_demo({}, progress));
        if (a->json)
          fmt::print("{}\n", report.to_json().dump(2));
        else
          fmt::print("{}", report.to_markdown());
      };
    }};

}  // namespace
