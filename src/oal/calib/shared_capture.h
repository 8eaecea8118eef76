#pragma once
// The calibration's capture spread over the processes of a run: rank r runs the model
// forward and computes the softmax targets for blocks r, r + size, r + 2·size, ... of the
// training blocks followed by the validation blocks, then every rank receives every
// block's tensors (all_gather) in block order. Each block is its own forward pass, so the result
// equals the single-process capture; the work per rank is 1/size of it — at model scale the capture
// is most of a calibration (docs/calibration.md).
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "oal/calib/calibrate.h"
#include "oal/core/progress.h"
#include "oal/dist/world.h"
#include "oal/model/transformer.h"

namespace oal::calib {

// Fit inputs (q, k, v and softmax targets) of `layers` for train [Nt, T] and val [Nv, T]
// int64 blocks, as fit_inputs(capture_qkv(train), capture_qkv(val)) gives them, with the
// work shared over `world`. Every rank must call it with the same arguments. Progress:
// this rank's blocks ("sequences").
std::vector<LayerFitInput> shared_fit_inputs(const model::Transformer& model,
                                             const at::Tensor& train, const at::Tensor& val,
                                             const std::vector<int64_t>& layers,
                                             dist::World& world, const ProgressFn& progress = {});

// Rows r, r + size, ... of `blocks` [N, ...] for rank r (all of them for one process).
at::Tensor rank_share(const at::Tensor& blocks, const dist::World& world);

// Inverse of rank_share over all ranks: from this rank's rows `mine` [n_r, ...] returns
// the full [n, ...] tensor in row order (contiguous, CPU, mine's dtype).
at::Tensor gather_shares(const at::Tensor& mine, int64_t n, dist::World& world);

}  // namespace oal::calib
