#include "oal/train/optimizer.h"

#include <torch/optim.h>

#include <cmath>
#include <map>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"
#include "oal/io/safetensors.h"

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
  return static_cast<const torch::optim::AdamWOptions&>(impl_->opt->param_groups()[0].options())
      .lr();
}

void AdamW::zero_grad() {
  for (auto& p : impl_->params) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

void AdamW::step() { impl_->opt->step(); }

namespace {

constexpr const char* k_state_format = "oal-adamw";
constexpr const char* k_state_version = "1";

std::string state_key(const at::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

}  // namespace

// The moments of parameter i as "<i>.exp_avg", "<i>.exp_avg_sq" and "<i>.step" (int64
// scalar) in safetensors bytes, parameters without state (never stepped) left out.
// Torch's own archive format is not used: loading it runs TorchScript's deserializer,
// which crashes on corrupted files (found by fuzz/fuzz_checkpoint) instead of failing.
std::string AdamW::save_state() const {
  std::map<std::string, at::Tensor> tensors;
  const auto& state = impl_->opt->state();
  for (size_t i = 0; i < impl_->params.size(); ++i) {
    auto it = state.find(state_key(impl_->params[i]));
    if (it == state.end()) continue;
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    tensors[fmt::format("{}.exp_avg", i)] = s.exp_avg();
    tensors[fmt::format("{}.exp_avg_sq", i)] = s.exp_avg_sq();
    tensors[fmt::format("{}.step", i)] = at::scalar_tensor(s.step(), at::kLong);
  }
  return io::encode_safetensors(tensors, {{"format", k_state_format},
                                          {"version", k_state_version},
                                          {"params", std::to_string(impl_->params.size())}});
}

void AdamW::load_state(const std::string& bytes) {
  const io::SafetensorsFile f = io::decode_safetensors(bytes, "optimizer state");
  const auto meta = [&](const char* key) {
    auto it = f.metadata.find(key);
    return it == f.metadata.end() ? std::string() : it->second;
  };
  check(meta("format") == k_state_format && meta("version") == k_state_version, "adamw",
        "optimizer state: expected format {} version {} (state written by an older build "
        "cannot be read: restart without --resume)", k_state_format, k_state_version);
  const size_t n = impl_->params.size();
  check(meta("params") == std::to_string(n), "adamw",
        "optimizer state is for {} parameters, this optimizer has {}", meta("params"), n);
  std::map<std::string, const at::Tensor*> unused;
  for (const auto& [name, t] : f.tensors) unused[name] = &t;
  std::vector<std::unique_ptr<torch::optim::AdamWParamState>> loaded(n);
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& p = impl_->params[i];
    const std::string a = fmt::format("{}.exp_avg", i), b = fmt::format("{}.exp_avg_sq", i),
                      st = fmt::format("{}.step", i);
    const int present = int(unused.count(a)) + int(unused.count(b)) + int(unused.count(st));
    if (present == 0) continue;
    check(present == 3, "adamw", "optimizer state: parameter {} needs {}, {} and {}", i, a, b, st);
    for (const auto& name : {a, b})
      check(unused[name]->sizes() == p.sizes() && at::isFloatingType(unused[name]->scalar_type()),
            "adamw", "optimizer state: '{}' must be floating point of shape {}, got {} {}", name,
            shape_str(p), c10::toString(unused[name]->scalar_type()), shape_str(*unused[name]));
    const at::Tensor& step = *unused[st];
    check(step.dim() == 0 && step.scalar_type() == at::kLong && step.item<int64_t>() >= 0,
          "adamw", "optimizer state: '{}' must be a non-negative int64 scalar", st);
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(step.item<int64_t>());
    s->exp_avg(unused[a]->to(p.device(), p.scalar_type()));
    s->exp_avg_sq(unused[b]->to(p.device(), p.scalar_type()));
    loaded[i] = std::move(s);
    for (const auto& name : {a, b, st}) unused.erase(name);
  }
  check(unused.empty(), "adamw", "optimizer state: unexpected tensor '{}'",
        unused.empty() ? std::string() : unused.begin()->first);
  auto& state = impl_->opt->state();
  state.clear();
  for (size_t i = 0; i < n; ++i)
    if (loaded[i]) state[state_key(impl_->params[i])] = std::move(loaded[i]);
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
