// Transformer forward against an independent plain fp64 forward (reference_forward.h)
// on synthetic HF checkpoints covering every architecture option, RoPE against scalar
// loops, and bad input.
#include <gtest/gtest.h>

#include "common/tiny_model.h"
#include "oal/attention/registry.h"
#include "oal/attention/softmax/softmax_method.h"
#include "oal/core/error.h"
#include "oal/model/rope.h"
#include "oal/model/transformer.h"
#include "reference_forward.h"

using namespace oal::model;
using namespace oal::fixtures;
using oal::test::reference_logits;

namespace {

// fp32 forward vs fp64 reference: fp32 rounding (~6e-8 relative) accumulates over a few
// layers of GEMMs with inner sizes <= 128 and an lm_head over 64..; logits here are
// O(1..10), so 2e-4 absolute + 1e-4 relative leaves a wide margin over the observed
// ~1e-5 while still catching any real formula error (those are O(0.1) or more).
constexpr double k_atol = 2e-4, k_rtol = 1e-4;

void expect_matches_reference(const ModelWeights& w, const TransformerOptions& opt = {}) {
  Transformer model(w, opt);
  const at::Tensor tokens = oal::test::test_tokens(2, 37, w.config.vocab_size);
  const at::Tensor logits = model.forward(tokens);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 37, w.config.vocab_size}));
  EXPECT_EQ(logits.scalar_type(), at::kFloat);
  for (int64_t r = 0; r < 2; ++r) {
    const at::Tensor ref = reference_logits(w, oal::test::row(tokens, r));
    const at::Tensor got = logits[r].to(at::kDouble);
    const double err = (got - ref).abs().max().item<double>();
    EXPECT_TRUE(at::allclose(got, ref, k_rtol, k_atol)) << "row " << r << " max |diff| " << err;
  }
}

}  // namespace

TEST(Transformer, Qwen2WithBiasesSingleFileMatchesReference) {
  SyntheticOptions o = oal::test::small_synthetic(SyntheticArch::qwen2, 0);
  const ModelWeights w = oal::test::synthetic_checkpoint(o, "qwen2");
  ASSERT_TRUE(w.config.attention_bias);
  ASSERT_TRUE(w.tensors.count("model.layers.0.self_attn.q_proj.bias"));
  expect_matches_reference(w);
}

TEST(Transformer, Llama3RopeScalingTiedShardedBf16MatchesReference) {
  SyntheticOptions o = oal::test::small_synthetic(SyntheticArch::llama, 0);
  o.llama3_rope_scaling = true;
  o.tie_word_embeddings = true;
  o.shards = 3;
  o.dtype = at::kBFloat16;
  o.num_heads = 8;  // head_dim 8: wavelengths 6.3, 63, 628, 6283 against the bands
  o.num_kv_heads = 2;  // < 32 unchanged, 32..128 interpolated, > 128 divided (orig 512/4)
  o.max_position_embeddings = 512;
  const ModelWeights w = oal::test::synthetic_checkpoint(o, "llama3");
  ASSERT_TRUE(w.config.rope_scaling.has_value());
  ASSERT_TRUE(w.config.tie_word_embeddings);
  ASSERT_EQ(w.tensors.at("model.embed_tokens.weight").scalar_type(), at::kBFloat16);
  expect_matches_reference(w);
}

TEST(Transformer, GqaRatioSevenAndHeadDimOverride) {
  SyntheticOptions o = oal::test::small_synthetic(SyntheticArch::qwen2, 0);
  o.num_heads = 7;
  o.num_kv_heads = 1;
  o.head_dim = 16;  // Hq*D = 112 != hidden 64, as head_dim overrides allow
  const ModelWeights w = oal::test::synthetic_checkpoint(o, "gqa7");
  expect_matches_reference(w);
}

TEST(Transformer, KeepWeightDtypeGivesSameLogitsWithHalfTheBytes) {
  SyntheticOptions o = oal::test::small_synthetic(SyntheticArch::qwen2, 0);
  o.dtype = at::kBFloat16;
  const ModelWeights w = oal::test::synthetic_checkpoint(o, "keep");
  const Transformer wide(w);
  const Transformer narrow(w, {.weights = WeightFormat::stored});
  EXPECT_LT(narrow.weight_bytes(), wide.weight_bytes() * 6 / 10);
  EXPECT_EQ(narrow.num_parameters(), wide.num_parameters());
  const at::Tensor tokens = oal::test::test_tokens(2, 20, w.config.vocab_size);
  // Widening bf16 to fp32 is exact, so both run the same fp32 GEMMs on the same values.
  EXPECT_TRUE(at::allclose(wide.forward(tokens), narrow.forward(tokens), 1e-6, 1e-6));
  expect_matches_reference(w, {.weights = WeightFormat::stored});
}

TEST(Transformer, RowsOfABatchAreIndependent) {
  const ModelWeights w = oal::test::synthetic_checkpoint(oal::test::small_synthetic(SyntheticArch::llama, 0), "batch");
  const Transformer model(w);
  const at::Tensor tokens = oal::test::test_tokens(3, 16, w.config.vocab_size);
  const at::Tensor all = model.forward(tokens);
  for (int64_t r = 0; r < 3; ++r)
    EXPECT_TRUE(at::allclose(all[r], model.forward(tokens.narrow(0, r, 1))[0], 1e-5, 1e-5));
}

TEST(Transformer, ForwardIsDifferentiableThroughAdapters) {
  const ModelWeights w = oal::test::synthetic_checkpoint(oal::test::small_synthetic(SyntheticArch::llama, 0), "grad");
  Transformer model(w);
  // A trainable additive bias on one projection, through the LinearDelta hook.
  struct Shift : LinearDelta {
    at::Tensor b;
    at::Tensor apply(const at::Tensor& x) const override {
      return b.expand({x.size(0), x.size(1), b.size(0)});
    }
  };
  auto shift = std::make_shared<Shift>();
  shift->b = at::zeros({w.config.hidden_size}, at::kFloat).set_requires_grad(true);
  model.layer(1).o_proj.delta = shift;
  const at::Tensor logits = model.forward(oal::test::test_tokens(1, 8, w.config.vocab_size));
  logits.logsumexp(-1).sum().backward();
  ASSERT_TRUE(shift->b.grad().defined());
  EXPECT_GT(shift->b.grad().abs().sum().item<double>(), 0.0);
}

TEST(Transformer, RejectsBadInput) {
  const ModelWeights w = oal::test::synthetic_checkpoint(oal::test::small_synthetic(SyntheticArch::llama, 0), "bad");
  const Transformer model(w);
  const int64_t V = w.config.vocab_size;
  EXPECT_THROW(model.forward(at::full({1, 4}, V, at::kLong)), oal::Error);        // id >= V
  EXPECT_THROW(model.forward(at::full({1, 4}, -1, at::kLong)), oal::Error);       // negative
  EXPECT_THROW(model.forward(at::zeros({1, 4}, at::kInt)), oal::Error);           // dtype
  EXPECT_THROW(model.forward(at::zeros({4}, at::kLong)), oal::Error);             // rank
  EXPECT_THROW(model.forward(at::zeros({1, 0}, at::kLong)), oal::Error);          // empty
  EXPECT_THROW(model.forward(at::zeros({1, 129}, at::kLong)), oal::Error);        // > max pos
  EXPECT_THROW(const_cast<Transformer&>(model).set_attention(0, nullptr), oal::Error);
  EXPECT_THROW(model.layer(2), oal::Error);

  ModelWeights missing = w;
  missing.tensors.erase("model.layers.1.mlp.up_proj.weight");
  try {
    Transformer t(missing);
    FAIL() << "expected an error for a missing tensor";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.mlp.up_proj.weight"), std::string::npos);
  }
  ModelWeights wrong = w;
  wrong.tensors["model.norm.weight"] = at::ones({3});
  EXPECT_THROW(Transformer{wrong}, oal::Error);
}

TEST(Rope, HalfAndAdjacentMatchScalarLoops) {
  for (RopeStyle style : {RopeStyle::half, RopeStyle::adjacent}) {
    for (bool scaled : {false, true}) {
      ModelConfig c;
      c.head_dim = 16;
      c.rope_theta = 500000.0;
      c.rope_style = style;
      if (scaled) c.rope_scaling = RopeScaling{8.0, 1.0, 4.0, 64};
      const Rope rope(c);
      const int64_t offset = 5, T = 9;
      const at::Tensor x = at::randn({2, 3, T, 16}, at::kDouble);
      const at::Tensor got = rope.apply(x, offset);
      const auto inv = oal::test::reference_inv_freq(c);
      at::Tensor want = x.clone();
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t h = 0; h < 3; ++h)
          for (int64_t t = 0; t < T; ++t)
            oal::test::reference_rotate(want[b][h][t].data_ptr<double>(), 16, offset + t, inv,
                                        style == RopeStyle::adjacent);
      // Both fp64 with the same angles: only cos/sin rounding differs.
      EXPECT_TRUE(at::allclose(got, want, 1e-12, 1e-12))
          << "style " << int(style) << " scaled " << scaled;
    }
  }
}

TEST(Rope, Llama3ScalingKeepsHighDividesLowInterpolatesMiddle) {
  RopeScaling s{8.0, 1.0, 4.0, 8192};
  // Wavelengths 2π/f: 100 (< 8192/4: unchanged), 20000 (> 8192: divided by 8),
  // 4096 (between: smooth = (8192/4096 - 1)/3 = 1/3).
  const at::Tensor f = at::tensor({2 * M_PI / 100, 2 * M_PI / 20000, 2 * M_PI / 4096}, at::kDouble);
  const at::Tensor g = llama3_scaled_inv_freq(f, s);
  const double f2 = 2 * M_PI / 4096;
  EXPECT_NEAR(g[0].item<double>(), f[0].item<double>(), 1e-15);
  EXPECT_NEAR(g[1].item<double>(), f[1].item<double>() / 8, 1e-15);
  EXPECT_NEAR(g[2].item<double>(), (2.0 / 3) * f2 / 8 + (1.0 / 3) * f2, 1e-15);
  EXPECT_THROW(llama3_scaled_inv_freq(f, RopeScaling{8.0, 4.0, 1.0, 8192}), oal::Error);
}

TEST(Rope, RejectsOddHeadDimAndWrongShape) {
  EXPECT_THROW(Rope(7, 10000.0, RopeStyle::half), oal::Error);
  EXPECT_THROW(Rope(8, 0.0, RopeStyle::half), oal::Error);
  const Rope rope(8, 10000.0, RopeStyle::half);
  EXPECT_THROW(rope.apply(at::zeros({1, 1, 4, 6}), 0), oal::Error);
  EXPECT_THROW(rope.apply(at::zeros({1, 4, 8}), 0), oal::Error);
}

namespace {

// Softmax attention whose decode states record the largest number of tokens one
// extend() was given: how a prefill was sliced.
struct LargestExtend {
  int64_t tokens = 0;
};
class RecordingState : public oal::attn::DecodeState {
 public:
  RecordingState(std::unique_ptr<oal::attn::DecodeState> inner, std::shared_ptr<LargestExtend> seen)
      : inner_(std::move(inner)), seen_(std::move(seen)) {}
  at::Tensor extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    seen_->tokens = std::max(seen_->tokens, q.size(2));
    return inner_->extend(q, k, v);
  }
  int64_t tokens() const override { return inner_->tokens(); }
  int64_t state_bytes() const override { return inner_->state_bytes(); }
  oal::attn::StateSnapshot snapshot() const override { return inner_->snapshot(); }
  void restore(const oal::attn::StateSnapshot& s) override { inner_->restore(s); }

 private:
  std::unique_ptr<oal::attn::DecodeState> inner_;
  std::shared_ptr<LargestExtend> seen_;
};
class RecordingSoftmax : public oal::attn::SoftmaxAttention {
 public:
  std::shared_ptr<LargestExtend> seen = std::make_shared<LargestExtend>();
  std::unique_ptr<oal::attn::DecodeState> new_state(int64_t batch) const override {
    return std::make_unique<RecordingState>(SoftmaxAttention::new_state(batch), seen);
  }
};

}  // namespace

TEST(Transformer, PrefillInUbatchesIsTheSamePrefill) {
  // TransformerOptions::ubatch: a 45-token prompt in ubatches of 16 (the last one short)
  // against the whole prompt at once, with a softmax layer (KV cache growing across
  // ubatches) and an OAL layer (the HD state continuing), then a decode step from each
  // set of states. Only fp32 summation order differs: the reference tolerance holds.
  const ModelWeights w =
      oal::fixtures::make_synthetic_weights(oal::test::small_synthetic(SyntheticArch::qwen2, 21));
  at::NoGradGuard no_grad;
  Transformer whole(w), ubatched(w, {.ubatch = 16});
  const oal::attn::MethodShape shape{1, w.config.num_heads, w.config.num_kv_heads,
                                     w.config.head_dim};
  for (Transformer* m : {&whole, &ubatched})
    m->set_attention(1, oal::attn::make_method("global", shape, 0, nullptr));
  const at::Tensor prompt = oal::test::test_tokens(2, 45, w.config.vocab_size, 3);
  const at::Tensor next = oal::test::test_tokens(2, 1, w.config.vocab_size, 4);
  auto sw = whole.new_states(2), su = ubatched.new_states(2);
  const at::Tensor hw = whole.extend_hidden(prompt, sw), hu = ubatched.extend_hidden(prompt, su);
  ASSERT_EQ(hu.sizes(), hw.sizes());
  EXPECT_TRUE(at::allclose(hu, hw, k_rtol, k_atol))
      << "max |diff| " << (hu - hw).abs().max().item<double>();
  for (size_t l = 0; l < sw.size(); ++l) EXPECT_EQ(su[l]->tokens(), 45) << "layer " << l;
  const at::Tensor dw = whole.extend_hidden(next, sw), du = ubatched.extend_hidden(next, su);
  EXPECT_TRUE(at::allclose(du, dw, k_rtol, k_atol))
      << "max |diff| " << (du - dw).abs().max().item<double>();
  // And the whole prompt is the stateless forward's.
  EXPECT_TRUE(at::allclose(hw, whole.hidden_states(prompt), k_rtol, k_atol));
  // The slicing itself: layer 0 saw at most 16 tokens per call with ubatches, all 45
  // without.
  for (auto [m, most] : {std::pair{&whole, 45}, std::pair{&ubatched, 16}}) {
    auto recorder = std::make_shared<RecordingSoftmax>();
    m->set_attention(0, recorder);
    auto states = m->new_states(2);
    m->extend_hidden(prompt, states);
    EXPECT_EQ(recorder->seen->tokens, most);
  }
}
