#include "oal/calib/calibrate_model.h"

#include <chrono>

#include "oal/analysis/layer_selection.h"
#include "oal/calib/layer_data.h"
#include "oal/calib/shared_capture.h"

namespace oal::calib {

CalibrationResult calibrate_model(const model::Transformer& model,
                                  const std::vector<int32_t>& stream,
                                  const attn::ModelKernels* groups,
                                  const ModelCalibrationOptions& options) {
  SplitBlocks blocks = split_blocks(stream, options.ctx, options.split);
  const std::vector<int64_t> layers =
      oal::analysis::resolve_layers(options.layers, model.num_layers());
  const auto world = options.calibration.world ? options.calibration.world : dist::single_process();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<LayerFitInput> inputs = shared_fit_inputs(model, blocks.train, blocks.val, layers,
                                                        *world, options.capture_progress);
  const auto t1 = std::chrono::steady_clock::now();
  CalibrationResult r = calibrate(inputs, groups, options.calibration);
  r.capture_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.fit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  return r;
}

}  // namespace oal::calib
