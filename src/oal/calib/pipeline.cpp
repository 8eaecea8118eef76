#include "oal/calib/pipeline.h"

#include "oal/calib/layer_data.h"

namespace oal::calib {

CalibrationResult calibrate_model(const model::Transformer& model,
                                  const std::vector<int32_t>& stream,
                                  const attn::ModelKernels* groups,
                                  const ModelCalibrationOptions& options) {
  SplitBlocks blocks = split_blocks(stream, options.ctx, options.split);
  const std::vector<int64_t> layers = resolve_layers(model, options.layers);
  auto train = capture_qkv(model, blocks.train, layers, options.capture_progress);
  auto val = capture_qkv(model, blocks.val, layers, options.capture_progress);
  return calibrate(fit_inputs(train, val), groups, options.calibration);
}

}  // namespace oal::calib
