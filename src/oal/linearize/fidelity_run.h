#pragma once
// Fidelity of a calibration run on a model's evaluation blocks (split.eval): captures the
// chosen layers and compares every method of the run (fidelity.h).
#include <cstdint>
#include <string>
#include <vector>

#include "oal/calib/block_split.h"
#include "oal/calib/calibrate.h"
#include "oal/linearize/fidelity.h"
#include "oal/model/transformer.h"

namespace oal::linearize {

// `layers`: the layers to evaluate (empty: every layer in `methods`); each must be in
// `methods`. `order`: method names to report (empty: the table order of
// attn::method_names() filtered to what the run has).
FidelityResult evaluate_run(const model::Transformer& model, const std::vector<int32_t>& stream,
                            int64_t ctx, const calib::BlockSplit& split,
                            const std::vector<attn::LayerMethods>& methods,
                            std::vector<int64_t> layers, std::vector<std::string> order,
                            const ProgressFn& capture_progress = {},
                            const ProgressFn& progress = {});

}  // namespace oal::linearize
