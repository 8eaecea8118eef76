#pragma once
// One optimizer update of LoRA fine-tuning, split into the parts a training benchmark
// reports: forward (the model and the loss, whose gradient the chunked loss computes
// alongside), backward (autograd from the hidden states down to the adapters), and the
// optimizer (gradients summed over ranks, clipped, AdamW). finetune() and
// `oal bench --train` run this same function.
#include <ATen/ATen.h>

#include <vector>

#include "oal/dist/world.h"
#include "oal/model/transformer.h"
#include "oal/train/optimizer.h"

namespace oal::train {

// The LM head as the chunked loss reads it.
struct LossHead {
  at::Tensor w;    // [V, hidden] fp32 on the model's device
  at::Tensor w_t;  // [hidden, V] fp32 contiguous on the CPU (the kernels' operand), else undefined
};

// The head alone (w_t undefined): enough for a loss without a gradient.
LossHead loss_head(const model::Transformer& model);

// What an update needs, built once per model rather than per call: Wᵀ of every frozen
// projection (model/frozen_linear.h; CPU fp32 weights) and the LM head decoded to dense
// fp32 with its transpose (a quantized or bf16 head would otherwise be widened on every
// update). Throws oal::Error("[finetune] ...") for a head with a bias or adapter.
LossHead prepare_for_training(model::Transformer& model);

// Summed next-token NLL of `blocks` int64 [N, ctx] (targets: N·(ctx−1)), a 0-dim fp32
// tensor, differentiable when grad mode is on. The logits are never held for all
// positions at once (chunked_nll.h).
at::Tensor block_nll_sum(const model::Transformer& model, const LossHead& head,
                         const at::Tensor& blocks);

struct UpdateResult {
  double loss = 0;       // mean NLL per target over every rank's blocks
  double grad_norm = 0;  // before clipping
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;  // this rank's wall time
};

// One update on this rank's `blocks` [n, ctx] (n may be 0 on a rank without a share):
// loss = block_nll_sum / `targets` (the whole update's target count over all ranks),
// backward, gradients of `params` summed over `world`, clipped to `clip_norm`, one step
// of `opt`, gradients cleared. Throws oal::Error("[finetune] ...") when the loss is not
// finite (before the optimizer touches anything).
UpdateResult run_update(const model::Transformer& model, const LossHead& head,
                        const at::Tensor& blocks, double targets,
                        const std::vector<at::Tensor>& params, AdamW& opt, double clip_norm,
                        dist::World& world);

}  // namespace oal::train
