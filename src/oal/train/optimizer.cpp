#include "oal/train/optimizer.h"

#include <torch/optim.h>
#include <torch/serialize.h>

#include <cmath>
#include <sstream>

#include "oal/core/error.h"

namespace oal::train {

struct AdamW::Impl {
  std::vector<at::Tensor> params;
  std::unique_ptr<torch::optim::AdamW> opt;
};

AdamW::AdamW(std::vector<at::Tensor> params, AdamWOptions o) : impl_(std::make_unique<Impl>()) {
  check(!params.empty(), "adamw", "expected at least one trainable tensor");
  for (const auto& p : params)
    check(p.defined() && p.requires_grad() && p.is_leaf(), "adamw",
          "every parameter must be a leaf tensor with requires_grad");
  check(o.lr > 0 && o.weight_decay >= 0 && o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 &&
            o.beta2 < 1 && o.eps > 0,
        "adamw", "invalid options lr {} wd {} betas ({}, {}) eps {}", o.lr, o.weight_decay,
        o.beta1, o.beta2, o.eps);
  impl_->params = std::move(params);
  impl_->opt = std::make_unique<torch::optim::AdamW>(
      impl_->params, torch::optim::AdamWOptions(o.lr)
                         .betas({o.beta1, o.beta2})
                         .eps(o.eps)
                         .weight_decay(o.weight_decay));
}

AdamW::~AdamW() = default;

void AdamW::set_lr(double lr) {
  for (auto& g : impl_->opt->param_groups())
    static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

double AdamW::lr() const {
  return static_cast<const torch::optim::AdamWOptions&>(impl_->opt->param_groups()[0].options()).lr();
}

void AdamW::zero_grad() {
  for (auto& p : impl_->params) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

void AdamW::step() { impl_->opt->step(); }

std::string AdamW::save_state() const {
  torch::serialize::OutputArchive archive;
  impl_->opt->save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void AdamW::load_state(const std::string& bytes) {
  torch::serialize::InputArchive archive;
  std::istringstream in(bytes);
  try {
    archive.load_from(in, impl_->params.front().device());
    impl_->opt->load(archive);
  } catch (const c10::Error& e) {
    fail("adamw", "cannot read optimizer state ({} bytes): {}", bytes.size(), e.what_without_backtrace());
  }
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  check(max_norm > 0, "clip_grad_norm", "max norm must be > 0, got {}", max_norm);
  double sq = 0;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    sq += p.grad().to(at::kDouble).pow(2).sum().item<double>();
  }
  const double total = std::sqrt(sq);
  check(std::isfinite(total), "clip_grad_norm", "gradient norm is not finite ({})", total);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) {
    at::NoGradGuard no_grad;
    for (const auto& p : params)
      if (p.grad().defined()) p.grad().mul_(coef);
  }
  return total;
}

}  // namespace oal::train
