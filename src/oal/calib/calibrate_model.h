#pragma once
// Whole-model calibration from a token stream: split into blocks, capture the train and
// validation blocks of the chosen layers, fit every requested method (calibrate.h).
#include <cstdint>
#include <vector>

#include "oal/calib/block_split.h"
#include "oal/calib/calibrate.h"
#include "oal/model/transformer.h"

namespace oal::calib {

struct ModelCalibrationOptions {
  int64_t ctx = 256;
  std::vector<int64_t> layers;  // empty: all
  BlockSplit split;
  CalibrationOptions calibration;
  ProgressFn capture_progress;  // this rank's share of the capture (shared_capture.h)
};

CalibrationResult calibrate_model(const model::Transformer& model,
                                  const std::vector<int32_t>& stream,
                                  const attn::ModelKernels* groups,
                                  const ModelCalibrationOptions& options);

}  // namespace oal::calib
