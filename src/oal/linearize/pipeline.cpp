#include "oal/linearize/pipeline.h"

#include "oal/analysis/analysis_json.h"
#include "oal/analysis/chi_statistic.h"
#include "oal/attention/method_store.h"
#include "oal/attention/oal/kernel_json.h"
#include "oal/calib/calibrate_model.h"
#include "oal/calib/run_dir.h"
#include "oal/io/atomic_file.h"
#include "oal/io/json_file.h"
#include "oal/linearize/analysis_step.h"
#include "oal/linearize/fidelity_run.h"
#include "oal/linearize/run_record.h"

namespace oal::linearize {
namespace {

// The analysis step's options from the pipeline's: prompts from the splits' ctx.
AnalysisStepOptions analysis_options(const Splits& splits, const PipelineOptions& o) {
  AnalysisStepOptions a;
  a.model_name = o.model_name;
  a.prompts.calibration = o.prompts;
  a.prompts.ctx = splits.ctx;
  a.analyze.layers = o.layers;
  a.analyze.chi = o.grouping.chi;
  return a;
}

nlohmann::json fidelity_record(const FidelityResult& f, const Splits& splits,
                               const PipelineOptions& o) {
  nlohmann::json j = fidelity_json(f);
  j["model"] = o.model_name;
  j["chi_statistic"] = analysis::chi_statistic_name(o.grouping.chi);
  j["text"] = o.text_name;
  j["grouping_prompts"] = splits.grouping_source;
  j["ctx"] = splits.ctx;
  j["sinks"] = o.calibration.window.sinks;    // the exact window beside the linear methods
  j["window"] = o.calibration.window.recent;
  return j;
}

}  // namespace

PipelineResult run_pipeline(const model::Transformer& model, const std::vector<int32_t>& stream,
                            const text::Tokenizer& tokenizer, const Splits& splits,
                            const PipelineOptions& o, const std::filesystem::path& dir,
                            const PipelineProgress& progress) {
  namespace fs = std::filesystem;
  const nlohmann::json record = run_record(splits, o, static_cast<int64_t>(stream.size()));
  // Which steps are read back is decided once, before this run writes anything, so every
  // rank of a shared fit decides the same.
  const bool resuming = o.resume && fs::exists(dir / "pipeline.json");
  if (resuming)
    check_same_record(io::read_json_file(dir / "pipeline.json", "linearize"), record, dir);
  const bool have_analysis = resuming && fs::exists(dir / "analysis.json");
  const bool have_calibration = resuming && fs::exists(dir / "calibration.json");
  if (o.write) {
    fs::create_directories(dir);
    io::write_file_atomic(dir / "pipeline.json", record.dump(2) + "\n");
  }
  PipelineResult r;
  // 1. Contribution scores on the grouping prompts.
  if (have_analysis) {
    r.analysis = analysis::read_analysis(dir / "analysis.json");
    r.resumed.push_back("analysis");
  } else {
    r.analysis = analyze_step(model, tokenizer, splits.grouping_paragraphs,
                              analysis_options(splits, o), progress.analyze);
    if (o.write) analysis::write_analysis(dir / "analysis.json", r.analysis);
  }
  // 2. Grouping, as Taylor-initialised kernels.
  r.grouped = analysis::group_analysis(r.analysis, o.grouping, 0, progress.group);
  r.groups = analysis::grouped_kernels(r.grouped, r.analysis.head_dim, o.grouping, 0,
                                       {{"source", "oal linearize"}, {"model", o.model_name}});
  if (o.write) attn::write_kernels(dir / "groups.json", r.groups);
  // 3. Coefficient fitting of every method on the train / val blocks.
  calib::ModelCalibrationOptions co;
  co.ctx = splits.ctx;
  co.layers = o.layers;
  co.split = splits.blocks;
  co.calibration = o.calibration;
  co.calibration.progress = progress.calibrate;
  co.capture_progress = progress.capture;
  if (have_calibration) {
    r.calibration.layers = attn::read_method_store(dir).layers;
    r.resumed.push_back("calibration");
  } else {
    r.calibration = calib::calibrate_model(model, stream, &r.groups, co);
  }
  if (!o.write) return r;
  if (!have_calibration)
    calib::write_run(
        dir, r.calibration, co.calibration,
        {o.model_name, o.text_name, splits.ctx, splits.blocks, o.fingerprint, std::nullopt});
  // 4. Frozen-attention fidelity on the eval blocks.
  r.fidelity = evaluate_run(model, stream, splits.ctx, splits.blocks, r.calibration.layers,
                            o.layers, {}, progress.fidelity_capture, progress.fidelity);
  r.fidelity_json = fidelity_record(r.fidelity, splits, o);
  io::write_file_atomic(dir / "fidelity.json", r.fidelity_json.dump(2) + "\n");
  return r;
}

}  // namespace oal::linearize
