#pragma once
// LoRA adapters (Hu et al., 2022; paper App. F.2) on the attention projections of a
// Transformer. For a projection y = x Wᵀ (+ b) with W [out, in]:
//
//   y = x Wᵀ (+ b) + scale · dropout(x) Aᵀ Bᵀ,   A [rank, in], B [out, rank],
//   scale = alpha / rank,
//
// A ~ U(-1/sqrt(in), 1/sqrt(in)) (PEFT's kaiming_uniform(a=√5)), B = 0, so a freshly
// attached adapter leaves every output unchanged. Dropout acts on the adapter's input
// only while training. The backbone is untouched (its tensors do not require grad);
// only A and B are trainable. Adapters attach through Linear::delta (linear.h).
//
// Tensor names follow PEFT so that saved adapters read like a PEFT adapter_model:
//   base_model.model.model.layers.{i}.self_attn.{q,k,v,o}_proj.lora_{A,B}.weight
// A and B are fp32 on the model's device.
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oal/model/linear.h"
#include "oal/model/weights.h"

namespace oal::model {
class Transformer;
}  // namespace oal::model

namespace oal::adapt {

struct LoraConfig {
  int64_t rank = 8;
  double alpha = 16.0;
  double dropout = 0.05;
  // Throws oal::Error("[lora] ...") unless rank >= 1, alpha finite > 0, 0 <= dropout < 1.
  void validate() const;
  double scale() const { return alpha / double(rank); }
};

// The adapter of one projection (a LinearDelta: y += apply(x)).
class LoraDelta : public model::LinearDelta {
 public:
  // A initialised from `seed` on the CPU (same values on every device), B zero.
  LoraDelta(int64_t in_features, int64_t out_features, const LoraConfig& config, uint64_t seed,
            at::Device device);
  // x [..., in] fp32 -> scale · dropout(x) Aᵀ Bᵀ  [..., out] fp32.
  at::Tensor apply(const at::Tensor& x) const override;
  // scale · B A  [out, in] fp32: what merging adds to W.
  at::Tensor weight_delta() const;

  at::Tensor a;  // [rank, in] fp32, requires_grad
  at::Tensor b;  // [out, rank] fp32, requires_grad
  double scale = 1.0;
  double dropout = 0.0;
  bool training = false;
};

// Adapters on q_proj, k_proj, v_proj and o_proj of every layer.
class LoraAdapters {
 public:
  // Creates adapters for every layer of `model` and attaches them (replacing any delta
  // already set). Layer l, projection p uses seed `seed + 4 l + p`.
  static LoraAdapters attach(model::Transformer& model, const LoraConfig& config, uint64_t seed);
  // Removes the adapters from `model` (deltas reset to null).
  static void detach(model::Transformer& model);

  const LoraConfig& config() const { return config_; }
  // Dropout on (training) or off (evaluation).
  void set_training(bool training);
  // A and B of every adapter, in a fixed order (layer, q/k/v/o, A then B).
  std::vector<at::Tensor> parameters() const;
  // PEFT-named tensors (see top), sharing storage with the live adapters.
  std::map<std::string, at::Tensor> named_tensors() const;
  // Copies `tensors` (as written by named_tensors) into the adapters. Every adapter
  // tensor must be present with its shape; extra names are errors.
  void load(const std::map<std::string, at::Tensor>& tensors);
  // PEFT adapter_config.json content for these adapters.
  std::string peft_config_json() const;

  // The checkpoint's tensors with every adapted projection replaced by
  // W + scale · B A (in W's dtype); other tensors shared unchanged.
  model::ModelWeights merged(const model::ModelWeights& base) const;

  int64_t num_parameters() const;

 private:
  struct Entry {
    std::string name;  // "model.layers.{i}.self_attn.q_proj"
    std::shared_ptr<LoraDelta> delta;
  };
  LoraConfig config_;
  std::vector<Entry> entries_;
};

// PEFT tensor-name prefix of a module path ("base_model.model." + module).
std::string peft_name(const std::string& module, char which /* 'A' or 'B' */);

}  // namespace oal::adapt
