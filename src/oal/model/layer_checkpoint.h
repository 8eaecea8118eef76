#pragma once
// Activation checkpointing of one decoder layer for training (TransformerOptions::
// checkpoint_layers): the forward runs the layer without an autograd graph and keeps only
// its input; the backward runs it again with one and backpropagates through it. Memory
// per layer is its input [B, T, hidden] instead of every activation inside it (~80 KB
// per token and layer for SmolLM2 under LoRA), for one more forward of each layer.
//
// Gradients reach the layer's trainable leaves (LoRA A/B, kernel parameters) inside the
// recomputation's backward, and x's gradient is returned. The recomputation replays the
// default CPU generator's state of the forward, so dropout draws the same masks.
#include <ATen/ATen.h>

#include <cstdint>

namespace oal::model {

class Transformer;

// model.layer(i, x) under checkpointing; x [B, T, hidden] fp32 on the CPU (throws
// oal::Error("finetune") elsewhere: other devices' dropout generators are not replayed).
// The model must outlive the backward (the training update's).
at::Tensor checkpointed_layer(const Transformer& model, int64_t i, const at::Tensor& x);

}  // namespace oal::model
