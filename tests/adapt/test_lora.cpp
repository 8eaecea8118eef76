// LoRA on a tiny random transformer: zero-initialised B leaves outputs unchanged,
// gradients reach only adapters (and kernel parameters), merging equals the adapted
// forward, save/load round trip.
#include <gtest/gtest.h>

#include "common/tiny_model.h"
#include "oal/adapt/lora.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/core/error.h"
#include "oal/model/transformer.h"

namespace {

using namespace oal;

at::Tensor tokens() {
  return (at::arange(12, at::kLong) * 5 % 32).unsqueeze(0);
}

TEST(Lora, ZeroBLeavesOutputsUnchanged) {
  auto w = test::tiny_weights();
  model::Transformer base(w), adapted(w);
  auto lora = adapt::LoraAdapters::attach(adapted, {8, 16, 0.05}, 1);
  EXPECT_EQ(lora.parameters().size(), 3u * 4u * 2u);
  at::NoGradGuard g;
  // Exactly equal: B = 0 makes the delta an exact zero added to the same GEMM result.
  EXPECT_TRUE(at::equal(base.forward(tokens()), adapted.forward(tokens())));
  lora.set_training(true);  // dropout on: still zero because B = 0
  EXPECT_TRUE(at::equal(base.forward(tokens()), adapted.forward(tokens())));
}

TEST(Lora, NonZeroBChangesOutputsAndMergeMatches) {
  auto w = test::tiny_weights();
  model::Transformer adapted(w);
  auto lora = adapt::LoraAdapters::attach(adapted, {4, 8, 0.0}, 3);
  {
    at::NoGradGuard g;
    for (auto& [n, t] : lora.named_tensors())
      if (n.find("lora_B") != std::string::npos) t.normal_(0, 0.1);
  }
  model::Transformer base(w);
  at::NoGradGuard g;
  const at::Tensor y = adapted.forward(tokens());
  EXPECT_FALSE(at::allclose(y, base.forward(tokens()), 1e-4, 1e-4));
  model::Transformer merged(lora.merged(w));
  // fp32: W + sBA folded into one GEMM vs two GEMMs summed; rounding differs ~1e-6
  // relative per layer over 3 layers.
  EXPECT_TRUE(at::allclose(merged.forward(tokens()), y, 1e-4, 1e-4));
}

TEST(Lora, GradientsReachOnlyAdaptersAndKernelParameters) {
  auto w = test::tiny_weights();
  model::Transformer m(w);
  auto lora = adapt::LoraAdapters::attach(m, {8, 16, 0.05}, 1);
  {
    at::NoGradGuard g;  // non-zero B so that A receives a non-zero gradient too
    for (auto& [n, t] : lora.named_tensors())
      if (n.find("lora_B") != std::string::npos) t.normal_(0, 0.1);
  }
  auto kernel = std::make_shared<attn::QuadraticAttention>(attn::QuadraticAttention::from_kernels(
      {attn::QuadraticKernel::taylor(attn::QuadraticKernel::single_group(8)),
       attn::QuadraticKernel::taylor({{0, 1, 2, 3, 4, 5}, {6, 7}})},
      {}, true, at::kDouble));
  m.set_attention(1, kernel);
  lora.set_training(true);
  at::Tensor t = tokens();
  at::Tensor logits = m.forward(t.narrow(1, 0, 11));
  at::nll_loss(at::log_softmax(logits.reshape({-1, 32}), -1), t.narrow(1, 1, 11).reshape({-1}))
      .backward();
  for (const auto& p : lora.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_GT(p.grad().abs().sum().item<double>(), 0.0);
  }
  for (const auto& p : kernel->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_GT(p.grad().abs().sum().item<double>(), 0.0);
  }
  // Backbone: no tensor requires grad or received one.
  for (int64_t l = 0; l < m.num_layers(); ++l) {
    const auto& L = m.layer(l);
    for (const auto* lin :
         {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj, &L.up_proj, &L.down_proj}) {
      EXPECT_FALSE(lin->weight.requires_grad());
      EXPECT_FALSE(lin->weight.grad().defined());
    }
    EXPECT_FALSE(L.attn_norm.requires_grad());
  }
  EXPECT_FALSE(m.embed_tokens().weight.requires_grad());
}

TEST(Lora, SaveLoadRoundTripAndPeftNames) {
  auto w = test::tiny_weights();
  model::Transformer a(w), b(w);
  auto la = adapt::LoraAdapters::attach(a, {8, 16, 0.05}, 1);
  auto lb = adapt::LoraAdapters::attach(b, {8, 16, 0.05}, 99);
  auto named = la.named_tensors();
  ASSERT_TRUE(named.count("base_model.model.model.layers.2.self_attn.o_proj.lora_A.weight"));
  EXPECT_EQ(named.at("base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight").sizes(),
            (at::IntArrayRef{8, 8}));
  EXPECT_FALSE(at::equal(named.begin()->second, lb.named_tensors().begin()->second));
  lb.load(named);
  for (auto& [n, t] : lb.named_tensors()) EXPECT_TRUE(at::equal(t, named.at(n))) << n;
  named.erase(named.begin());
  EXPECT_THROW(lb.load(named), Error);
  EXPECT_THROW((adapt::LoraConfig{0, 16, 0.05}.validate()), Error);
  EXPECT_THROW((adapt::LoraConfig{8, 16, 1.0}.validate()), Error);
  EXPECT_NE(la.peft_config_json().find("\"r\": 8"), std::string::npos);
}

}  // namespace

// The scale is alpha / rank (Hu et al. 2022; PEFT's default), pinned by value: the merged
// and adapted outputs above both go through LoraDelta::scale, so a wrong scale would pass
// them. Here the expected outputs use the literal 4 = 12 / 3 and 2.5 = 5 / 2.
TEST(Lora, ScaleIsAlphaOverRankByValue) {
  adapt::LoraDelta d(6, 5, {3, 12.0, 0.0}, 7, at::kCPU);
  EXPECT_EQ(d.scale, 4.0);
  at::NoGradGuard g;
  d.b.copy_(at::linspace(-1, 1, 15).reshape({5, 3}));
  const at::Tensor x = at::linspace(-2, 3, 12).reshape({2, 6});
  // The same three fp32 products in the same order: equal up to one rounding of the
  // final scale multiplication.
  EXPECT_TRUE(
      at::allclose(d.apply(x), 4.0 * at::matmul(at::matmul(x, d.a.t()), d.b.t()), 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(d.weight_delta(), 4.0 * at::matmul(d.b, d.a), 1e-6, 1e-6));

  auto w = test::tiny_weights();
  model::Transformer m(w);
  auto lora = adapt::LoraAdapters::attach(m, {2, 5.0, 0.0}, 3);
  auto named = lora.named_tensors();
  const std::string p = "base_model.model.model.layers.0.self_attn.q_proj.";
  named.at(p + "lora_B.weight").normal_(0, 0.1);
  const model::ModelWeights merged = lora.merged(w);
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  const at::Tensor expect =
      w.tensors.at(q).to(at::kFloat) +
      2.5 * at::matmul(named.at(p + "lora_B.weight"), named.at(p + "lora_A.weight"));
  // fp32 sums of a [rows, 2] x [2, cols] product: ~1e-7 relative.
  EXPECT_TRUE(at::allclose(merged.tensors.at(q).to(at::kFloat), expect, 1e-5, 1e-6));
}
