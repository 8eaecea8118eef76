#pragma once
// A small hand-written Adam (Kingma & Ba; PyTorch's defaults betas (0.9, 0.999),
// eps 1e-8, no weight decay) and global grad-norm clipping, on ATen tensors. Written
// here instead of using torch::optim so that the calibration code needs only
// <ATen/ATen.h> (torch/optim pulls <torch/torch.h> into the build).
#include <ATen/ATen.h>

#include <vector>

namespace oal::calib {

class Adam {
 public:
  // `params`: leaf tensors with requires_grad, updated in place by step().
  Adam(std::vector<at::Tensor> params, double lr, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8);
  // One update from the current .grad() of every parameter (a missing grad counts as 0).
  void step();
  // Clears the gradients.
  void zero_grad();
  int64_t steps() const { return t_; }

 private:
  std::vector<at::Tensor> params_, m_, v_;
  double lr_, b1_, b2_, eps_;
  int64_t t_ = 0;
};

// Scales all gradients by max_norm / (norm + 1e-6) when their joint L2 norm exceeds
// max_norm (torch.nn.utils.clip_grad_norm_). Returns the norm before clipping.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace oal::calib
