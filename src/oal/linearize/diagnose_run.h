#pragma once
// The error-concentration diagnostics (diagnose.h) on a model's evaluation blocks
// (split.eval): captures the chosen layers and diagnoses them with their groups, the
// way fidelity_run.h evaluates a calibration run. `oal diagnose` calls it.
#include <cstdint>
#include <vector>

#include "oal/attention/oal/kernel_json.h"
#include "oal/calib/block_split.h"
#include "oal/linearize/diagnose.h"
#include "oal/model/transformer.h"

namespace oal::linearize {

// `groups`: the dimension groups per layer and query head (kernel JSON from `oal group`;
// group 0 the bulk). `layers`: those to diagnose (empty: every layer in `groups`); each
// must be in `groups` (oal::Error("kernel_json") otherwise).
DiagnoseResult diagnose_run(const model::Transformer& model, const std::vector<int32_t>& stream,
                            int64_t ctx, const calib::BlockSplit& split,
                            const attn::ModelKernels& groups, std::vector<int64_t> layers,
                            const DiagnoseOptions& options,
                            const ProgressFn& capture_progress = {});

}  // namespace oal::linearize
