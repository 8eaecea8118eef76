#include "oal/adapt/lora.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "oal/core/error.h"
#include "oal/model/transformer.h"

namespace oal::adapt {
namespace {

constexpr const char* k_projections[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};

model::Linear& projection(model::TransformerLayer& l, int p) {
  switch (p) {
    case 0:
      return l.q_proj;
    case 1:
      return l.k_proj;
    case 2:
      return l.v_proj;
    default:
      return l.o_proj;
  }
}

}  // namespace

void LoraConfig::validate() const {
  check(rank >= 1, "lora", "rank must be >= 1, got {}", rank);
  check(std::isfinite(alpha) && alpha > 0, "lora", "alpha must be finite and > 0, got {}", alpha);
  check(dropout >= 0 && dropout < 1, "lora", "dropout must be in [0, 1), got {}", dropout);
}

std::string peft_name(const std::string& module, char which) {
  return fmt::format("base_model.model.{}.lora_{}.weight", module, which);
}

LoraDelta::LoraDelta(int64_t in_features, int64_t out_features, const LoraConfig& config,
                     uint64_t seed, at::Device device)
    : scale(config.scale()), dropout(config.dropout) {
  config.validate();
  // kaiming_uniform(a = sqrt(5)) on [rank, in]: bound = 1 / sqrt(fan_in).
  const double bound = 1.0 / std::sqrt(double(in_features));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor a_cpu = at::empty({config.rank, in_features}, at::kFloat);
  a_cpu.uniform_(-bound, bound, gen);
  a = a_cpu.to(device).set_requires_grad(true);
  b = at::zeros({out_features, config.rank}, at::TensorOptions(at::kFloat).device(device))
          .set_requires_grad(true);
}

at::Tensor LoraDelta::apply(const at::Tensor& x) const {
  const at::Tensor xin = (training && dropout > 0) ? at::dropout(x, dropout, true) : x;
  return at::linear(at::linear(xin, a), b) * scale;
}

at::Tensor LoraDelta::weight_delta() const {
  return at::matmul(b, a) * scale;
}

LoraAdapters LoraAdapters::attach(model::Transformer& model, const LoraConfig& config,
                                  uint64_t seed) {
  config.validate();
  LoraAdapters out;
  out.config_ = config;
  for (int64_t l = 0; l < model.num_layers(); ++l) {
    for (int p = 0; p < 4; ++p) {
      model::Linear& lin = projection(model.layer(l), p);
      auto d = std::make_shared<LoraDelta>(lin.in_features(), lin.out_features(), config,
                                           seed + uint64_t(4 * l + p), lin.device());
      lin.delta = d;
      out.entries_.push_back({fmt::format("model.layers.{}.self_attn.{}", l, k_projections[p]), d});
    }
  }
  return out;
}

void LoraAdapters::detach(model::Transformer& model) {
  for (int64_t l = 0; l < model.num_layers(); ++l)
    for (int p = 0; p < 4; ++p) projection(model.layer(l), p).delta.reset();
}

void LoraAdapters::set_training(bool training) {
  for (auto& e : entries_) e.delta->training = training;
}

std::vector<at::Tensor> LoraAdapters::parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& e : entries_) {
    out.push_back(e.delta->a);
    out.push_back(e.delta->b);
  }
  return out;
}

std::map<std::string, at::Tensor> LoraAdapters::named_tensors() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& e : entries_) {
    out[peft_name(e.name, 'A')] = e.delta->a;
    out[peft_name(e.name, 'B')] = e.delta->b;
  }
  return out;
}

void LoraAdapters::load(const std::map<std::string, at::Tensor>& tensors) {
  size_t used = 0;
  at::NoGradGuard no_grad;
  for (auto& e : entries_) {
    for (char which : {'A', 'B'}) {
      const std::string n = peft_name(e.name, which);
      auto it = tensors.find(n);
      check(it != tensors.end(), "lora", "adapter tensor '{}' missing", n);
      at::Tensor& dst = which == 'A' ? e.delta->a : e.delta->b;
      check(it->second.sizes() == dst.sizes(), "lora",
            "adapter tensor '{}': expected shape {}, got {}", n, fmt::join(dst.sizes(), "x"),
            fmt::join(it->second.sizes(), "x"));
      dst.copy_(it->second.to(dst.device(), at::kFloat));
      ++used;
    }
  }
  check(used == tensors.size(), "lora", "expected {} adapter tensors, got {} (unexpected names)",
        used, tensors.size());
}

std::string LoraAdapters::peft_config_json() const {
  return fmt::format(
      "{{\n  \"peft_type\": \"LORA\",\n  \"task_type\": \"CAUSAL_LM\",\n  \"r\": {},\n"
      "  \"lora_alpha\": {},\n  \"lora_dropout\": {},\n  \"bias\": \"none\",\n"
      "  \"target_modules\": [\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\"]\n}}\n",
      config_.rank, config_.alpha, config_.dropout);
}

model::ModelWeights LoraAdapters::merged(const model::ModelWeights& base) const {
  model::ModelWeights out = base;
  at::NoGradGuard no_grad;
  for (const auto& e : entries_) {
    const std::string n = e.name + ".weight";
    auto it = out.tensors.find(n);
    check(it != out.tensors.end(), "lora", "cannot merge: checkpoint has no tensor '{}'", n);
    const at::Tensor w = it->second;
    at::Tensor m = w.to(at::kFloat).to(e.delta->a.device()) + e.delta->weight_delta();
    it->second = m.to(w.device(), w.scalar_type()).contiguous();
  }
  return out;
}

int64_t LoraAdapters::num_parameters() const {
  int64_t n = 0;
  for (const auto& e : entries_) n += e.delta->a.numel() + e.delta->b.numel();
  return n;
}

}  // namespace oal::adapt
