#pragma once
// AdamW over a list of trainable tensors (LoRA A/B and kernel parameters), wrapping
// torch::optim::AdamW (decoupled weight decay; the only file that includes
// <torch/optim.h> is optimizer.cpp), plus global grad-norm clipping.
// Parameters may live on any device; the optimizer state lives beside them.
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

namespace oal::train {

// Paper App. F.2 defaults.
struct AdamWOptions {
  double lr = 5e-4;
  double weight_decay = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

class AdamW {
 public:
  // params: leaf tensors with requires_grad (at least one). Throws oal::Error("[adamw] ...")
  // otherwise or for invalid options.
  AdamW(std::vector<at::Tensor> params, AdamWOptions options = {});
  ~AdamW();
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  void set_lr(double lr);
  double lr() const;
  // Clears (sets to undefined) every parameter's gradient.
  void zero_grad();
  // One update from the current gradients (parameters without a gradient are skipped).
  void step();
  // Serialised optimizer state (moments and step counts) as safetensors bytes (format
  // "oal-adamw" v1 in the metadata), and back. load_state needs an optimizer over
  // parameters of the same count and shapes, in the same order, and throws
  // oal::Error("[adamw] ...") / ("[safetensors] ...") for anything else.
  std::string save_state() const;
  void load_state(const std::string& bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Scales all gradients by min(1, max_norm / (total + 1e-6)) where total is the L2 norm
// of all gradients together (torch.nn.utils.clip_grad_norm_ semantics). Returns total
// (before clipping), computed in fp64. Throws oal::Error("[clip_grad_norm] ...") when
// the norm is not finite (NaN/inf gradients must not reach the optimizer).
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace oal::train
