#include "oal/calib/adam.h"

#include <cmath>

namespace oal::calib {

Adam::Adam(std::vector<at::Tensor> params, double lr, double beta1, double beta2, double eps)
    : params_(std::move(params)), lr_(lr), b1_(beta1), b2_(beta2), eps_(eps) {
  for (auto& p : params_) {
    m_.push_back(at::zeros_like(p.detach()));
    v_.push_back(at::zeros_like(p.detach()));
  }
}

void Adam::step() {
  at::NoGradGuard no_grad;
  ++t_;
  const double c1 = 1.0 - std::pow(b1_, double(t_)), c2 = 1.0 - std::pow(b2_, double(t_));
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor g = params_[i].grad();
    if (!g.defined()) g = at::zeros_like(m_[i]);
    m_[i].mul_(b1_).add_(g, 1.0 - b1_);
    v_[i].mul_(b2_).addcmul_(g, g, 1.0 - b2_);
    at::Tensor denom = (v_[i] / c2).sqrt_().add_(eps_);
    params_[i].addcdiv_(m_[i], denom, -lr_ / c1);
  }
}

void Adam::zero_grad() {
  for (auto& p : params_)
    if (p.grad().defined()) p.mutable_grad().reset();
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  at::NoGradGuard no_grad;
  double sq = 0;
  for (const auto& p : params)
    if (p.grad().defined()) sq += p.grad().to(at::kDouble).pow(2).sum().item<double>();
  const double norm = std::sqrt(sq);
  if (norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const auto& p : params)
      if (p.grad().defined()) p.grad().mul_(scale);
  }
  return norm;
}

}  // namespace oal::calib
