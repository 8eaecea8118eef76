// `oal demo`: a short tour of what the toolkit does, section by section (see
// src/oal/demo/demo_report.h): the attention operator on synthetic data, the analysis
// and groups of the synthetic model, the frozen-attention fidelity table, a short
// conversion + LoRA fine-tuning, and one layer of the real SmolLM2-135M through the
// paper's pipeline.
#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "oal/demo/demo_analysis.h"
#include "oal/demo/demo_fidelity.h"
#include "oal/demo/demo_operator.h"
#include "oal/demo/demo_report.h"
#include "oal/demo/demo_smollm2.h"
#include "oal/demo/demo_adapt.h"

namespace {

// `make()` when every file in `needed` exists, else a section saying what is missing.
template <typename Make>
oal::demo::DemoSection section_if_present(const std::string& title,
                                          const std::vector<std::string>& needed,
                                          const std::string& hint, Make&& make) {
  for (const auto& f : needed) {
    if (std::filesystem::exists(f)) continue;
    oal::demo::DemoSection skipped;
    skipped.title = title;
    skipped.notes.push_back("skipped: " + f + " not found (" + hint + ")");
    return skipped;
  }
  return make();
}

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
      app.add_option("--speed-n", a->op.speed_lengths,
                     "Sequence lengths timed (prefill; decode at the longest)")
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
      app.add_option("--repeats", a->op.repeats, "Timed prefill calls (median)")
          ->capture_default_str();
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
        // The sections on real models need their files; without them (a user's own
        // machine) a section says so instead of failing the whole tour.
        oal::demo::FidelityDemoOptions fid;
        report.sections.push_back(
            section_if_present("Frozen-attention fidelity (stories260K)", {fid.model, fid.text},
                               "run from the project root with ../shared/data",
                               [&] { return oal::demo::fidelity_demo(fid, progress); }));
        report.sections.push_back(oal::demo::adapt_demo({}, progress));
        oal::demo::SmolLM2DemoOptions smol;
        report.sections.push_back(section_if_present(
            "A real model: SmolLM2-135M", {smol.model, smol.text},
            "make models fetches the model; ../shared/data holds the text",
            [&] { return oal::demo::smollm2_demo(smol, progress); }));
        if (a->json)
          fmt::print("{}\n", report.to_json().dump(2));
        else
          fmt::print("{}", report.to_markdown());
      };
    }};

}  // namespace
