// Activation checkpointing per layer (model/layer_checkpoint.h, TransformerOptions::
// checkpoint_layers): the same loss and the same gradients as without it, LoRA dropout
// on (its masks replayed), through softmax, a trainable OAL layer and a windowed one.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "common/tiny_model.h"
#include "oal/adapt/lora.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/train/update.h"

namespace {

using namespace oal;

struct Grads {
  double loss = 0;
  std::vector<at::Tensor> grads;  // LoRA, then L and c_h of the kernel layers
};

Grads one_backward(bool checkpoint, uint64_t dropout_seed) {
  model::TransformerOptions o;
  o.checkpoint_layers = checkpoint;
  model::Transformer net(test::tiny_weights(), o);
  auto kernels = [] {
    return std::make_shared<attn::QuadraticAttention>(attn::QuadraticAttention::from_kernels(
        {attn::QuadraticKernel::taylor({{0, 1, 2, 3, 4, 5}, {6, 7}}),
         attn::QuadraticKernel::taylor(attn::QuadraticKernel::single_group(8))},
        {}, /*trainable=*/true, at::kFloat));
  };
  auto oal_layer = kernels();
  auto windowed = std::make_shared<attn::WindowedAttention>(kernels(), attn::Window{1, 3},
                                                            at::zeros({2}), /*trainable=*/true);
  net.set_attention(1, oal_layer);
  net.set_attention(2, windowed);
  auto lora = adapt::LoraAdapters::attach(net, {4, 8, 0.2}, 11);
  lora.set_training(true);
  at::manual_seed(dropout_seed);
  const at::Tensor loss = train::block_nll_sum(net, train::loss_head(net), test::tiny_blocks(2, 16, 1));
  loss.backward();
  Grads g;
  g.loss = loss.item<double>();
  std::vector<at::Tensor> params = lora.parameters();
  for (const auto* m : {static_cast<const attn::AttentionMethod*>(oal_layer.get()),
                        static_cast<const attn::AttentionMethod*>(windowed.get())})
    for (const at::Tensor& p : m->parameters()) params.push_back(p);
  for (const at::Tensor& p : params) g.grads.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  return g;
}

double rel(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-30);
}

// The recomputation runs the same operations on the same inputs with the same dropout
// masks; only the order in which autograd sums a layer input's gradients (the residual
// branch and the layer's own) differs, fp32 rounding (~6e-8) chained through three
// layers: seen up to 2e-6, so 1e-5 relative. A different dropout draw changes them by
// far more (checked: > 1e-3), so the comparison would see masks that were not replayed.
TEST(LayerCheckpoint, SameLossAndGradientsAsWithoutIt) {
  const Grads plain = one_backward(false, 3), ckpt = one_backward(true, 3);
  EXPECT_NEAR(ckpt.loss, plain.loss, 1e-6 * std::abs(plain.loss));  // the forward: same order
  ASSERT_EQ(ckpt.grads.size(), plain.grads.size());
  ASSERT_GT(plain.grads.size(), 4u);
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    ASSERT_TRUE(plain.grads[i].defined() && ckpt.grads[i].defined()) << "parameter " << i;
    EXPECT_LT(rel(ckpt.grads[i], plain.grads[i]), 1e-5) << "parameter " << i;
  }
  const Grads other = one_backward(false, 4);
  double worst = 0;
  for (size_t i = 0; i < plain.grads.size(); ++i)
    worst = std::max(worst, rel(other.grads[i], plain.grads[i]));
  EXPECT_GT(worst, 1e-3) << "dropout does not change the gradients: the test could not fail";
}

}  // namespace
