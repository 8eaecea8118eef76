// The decode step's row path (model/decode_layer.h) against the tensor layer it replaces
// (TransformerOptions::rowwise_decode = false) and against the independent fp64 forward
// (reference_forward.h), across architectures, RoPE styles and scalings, weight formats,
// batch shapes, a server's rows at different positions and linearised layers; the
// fallbacks (adapters, bf16-held weights) and RoPE's raw rotation on their own.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "common/tiny_model.h"
#include "oal/attention/registry.h"
#include "oal/core/error.h"
#include "oal/fixtures/synthetic.h"
#include "oal/generate/decode_session.h"
#include "oal/model/decode_layer.h"
#include "oal/model/rope.h"
#include "oal/model/transformer.h"
#include "reference_forward.h"

using namespace oal::model;

using namespace oal::fixtures;

using namespace oal::generate;
using oal::test::small_synthetic;

namespace {

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }

// Logits [B, steps, V] of a prompt's prefill followed by `steps` decode steps of one
// token each (the tokens given, not sampled: both paths see the same inputs).
at::Tensor decode_logits(const Transformer& m, const at::Tensor& tokens, int64_t prompt) {
  at::NoGradGuard no_grad;
  DecodeSession s(m, tokens.size(0));
  s.extend(tokens.narrow(1, 0, prompt));
  std::vector<at::Tensor> out;
  for (int64_t t = prompt; t < tokens.size(1); ++t) out.push_back(s.extend(tokens.narrow(1, t, 1)));
  return at::cat(out, 1);
}

// The two paths do the same products through the same projection kernels; they differ
// only in how the row-wise steps round: RMSNorm's mean of squares (fp64 here, ATen's
// fp32 cascade there), silu's exp (libm vs Sleef), FMA contraction in the rotation —
// each an ulp or so of a value of order 1. Through two layers and an lm_head of 64
// inputs that stays near 1e-6 of the logit scale (observed); 2e-5 of it leaves a margin
// while a wrong head, position, bias or residual moves logits by their own magnitude.
constexpr double k_rel = 2e-5;

void expect_paths_agree(const ModelWeights& w, WeightFormat format, int64_t batch) {
  const Transformer rows(w, {.weights = format}), tensors(w, {.weights = format, .rowwise_decode = false});
  const at::Tensor tokens = oal::test::test_tokens(batch, 20, w.config.vocab_size, 3);
  const at::Tensor a = decode_logits(rows, tokens, 6), b = decode_logits(tensors, tokens, 6);
  const double scale = max_abs(b);
  EXPECT_LT(max_abs(a - b), k_rel * scale) << "batch " << batch << ", logits up to " << scale;
}

}  // namespace

TEST(DecodeLayer, RowPathEqualsTensorLayerAcrossModels) {
  for (SyntheticArch arch : {SyntheticArch::llama, SyntheticArch::qwen2}) {
    SCOPED_TRACE(arch == SyntheticArch::llama ? "llama" : "qwen2 (q/k/v biases)");
    const ModelWeights w = make_synthetic_weights(small_synthetic(arch, 11));
    for (int64_t batch : {1, 3}) expect_paths_agree(w, WeightFormat::automatic, batch);
  }
  SyntheticOptions o = small_synthetic(SyntheticArch::llama, 12);
  o.llama3_rope_scaling = true;
  o.tie_word_embeddings = true;
  o.num_kv_heads = 1;  // GQA 4:1
  ModelWeights w = make_synthetic_weights(o);
  {
    SCOPED_TRACE("llama3 rope scaling, tied, GQA 4:1");
    expect_paths_agree(w, WeightFormat::automatic, 2);
  }
  w.config.rope_style = RopeStyle::adjacent;  // llama2.c's pairing
  {
    SCOPED_TRACE("adjacent RoPE pairs");
    expect_paths_agree(w, WeightFormat::automatic, 2);
  }
  {
    SCOPED_TRACE("Q8_0 weights (the quantized projection kernels)");
    expect_paths_agree(make_synthetic_weights(small_synthetic(SyntheticArch::qwen2, 13)), WeightFormat::q8_0, 2);
  }
}

TEST(DecodeLayer, RowPathMatchesTheIndependentFp64Forward) {
  // Every decode step's logits against the fp64 reference over the whole sequence: the
  // tolerance of test_transformer.cpp (fp32 rounding through two layers).
  const ModelWeights w = make_synthetic_weights(small_synthetic(SyntheticArch::qwen2, 14));
  const Transformer m(w);
  const at::Tensor tokens = oal::test::test_tokens(1, 16, w.config.vocab_size, 5);
  const at::Tensor got = decode_logits(m, tokens, 4)[0].to(at::kDouble);
  const at::Tensor ref = oal::test::reference_logits(w, oal::test::row(tokens, 0)).narrow(0, 4, 12);
  EXPECT_TRUE(at::allclose(got, ref, 1e-4, 2e-4)) << "max |diff| " << max_abs(got - ref);
}

TEST(DecodeLayer, ServerRowsAtDifferentPositionsAgreeWithTheTensorLayer) {
  const ModelWeights w = make_synthetic_weights(small_synthetic(SyntheticArch::qwen2, 15));
  at::NoGradGuard no_grad;
  const Transformer rows(w), tensors(w, {.rowwise_decode = false});
  // Three sequences with prompts of 3, 7 and 11 tokens, then four steps of all three.
  std::vector<Transformer::LayerStates> sr, st;
  const int64_t lens[] = {3, 7, 11};
  for (int64_t len : lens) {
    sr.push_back(rows.new_states(1));
    st.push_back(tensors.new_states(1));
    const at::Tensor p = oal::test::test_tokens(1, len, w.config.vocab_size, len);
    rows.extend_hidden(p, sr.back());
    tensors.extend_hidden(p, st.back());
  }
  for (int step = 0; step < 4; ++step) {
    const at::Tensor next = oal::test::test_tokens(1, 3, w.config.vocab_size, 20 + step).view({3});
    std::vector<Transformer::LayerStates*> pr, pt;
    for (int r = 0; r < 3; ++r) {
      pr.push_back(&sr[r]);
      pt.push_back(&st[r]);
    }
    std::vector<at::Tensor> tokens;
    for (int64_t r = 0; r < 3; ++r) tokens.push_back(next.narrow(0, r, 1));
    const at::Tensor a = rows.extend_rows(tokens, pr), b = tensors.extend_rows(tokens, pt);
    EXPECT_LT(max_abs(a - b), k_rel * max_abs(b)) << "step " << step;
  }
}

TEST(DecodeLayer, LinearisedLayersTakeTheRowPathToo) {
  // The attention is the layer's own state whatever the path: an OAL-shaped quadratic
  // layer (the learned global kernel's Taylor start) in layer 1.
  const ModelWeights w = make_synthetic_weights(small_synthetic(SyntheticArch::llama, 16));
  Transformer rows(w), tensors(w, {.rowwise_decode = false});
  const oal::attn::MethodShape shape{1, w.config.num_heads, w.config.num_kv_heads, w.config.head_dim};
  const auto global = oal::attn::make_method("global", shape, 0, nullptr);
  rows.set_attention(1, global);
  tensors.set_attention(1, global);
  const at::Tensor tokens = oal::test::test_tokens(2, 14, w.config.vocab_size, 7);
  const at::Tensor a = decode_logits(rows, tokens, 5), b = decode_logits(tensors, tokens, 5);
  EXPECT_LT(max_abs(a - b), k_rel * max_abs(b));
}

TEST(DecodeLayer, AdaptersKeepTheTensorLayerAndBf16WeightsTakeTheRows) {
  const ModelWeights w = make_synthetic_weights(small_synthetic(SyntheticArch::llama, 17));
  const at::Tensor tokens = oal::test::test_tokens(1, 10, w.config.vocab_size, 9);
  {
    // An adapter on one projection: that layer cannot run on rows, so both options give
    // the tensor layer's logits bit for bit.
    struct Shift : LinearDelta {
      at::Tensor b;
      at::Tensor apply(const at::Tensor& x) const override { return b.expand(x.sizes()); }
    };
    auto shift = std::make_shared<Shift>();
    shift->b = at::full({w.config.hidden_size}, 0.25f);
    Transformer rows(w), tensors(w, {.rowwise_decode = false});
    rows.layer(0).o_proj.delta = shift;
    tensors.layer(0).o_proj.delta = shift;
    EXPECT_FALSE(decode_layer_can_run(rows.layer(0), at::zeros({1, w.config.hidden_size})));
    EXPECT_TRUE(decode_layer_can_run(rows.layer(1), at::zeros({1, w.config.hidden_size})));
    const at::Tensor a = decode_logits(rows, tokens, 4), b = decode_logits(tensors, tokens, 4);
    const at::Tensor plain = decode_logits(Transformer(w), tokens, 4);
    EXPECT_GT(max_abs(a - plain), 1e-3);  // the adapter is applied
    EXPECT_LT(max_abs(a - b), k_rel * max_abs(b));  // layer 1 still takes the row path
  }
  {
    // bf16 weights whose rows are whole groups of 32 (hidden 64, intermediate 96) run on
    // rows too: the quantized-weight kernels widen them as they stream (simd/
    // linear_quant.h). The tensor layer runs the same kernels; the two agree as the row
    // path does on fp32 weights, and both differ from the fp32 model by the bf16 rounding.
    const Transformer rows(w, {.weights = WeightFormat::bf16}),
        tensors(w, {.weights = WeightFormat::bf16, .rowwise_decode = false});
    EXPECT_TRUE(decode_layer_can_run(rows.layer(0), at::zeros({1, w.config.hidden_size})));
    const at::Tensor a = decode_logits(rows, tokens, 4), b = decode_logits(tensors, tokens, 4);
    EXPECT_LT(max_abs(a - b), k_rel * max_abs(b));
    EXPECT_GT(max_abs(a - decode_logits(Transformer(w), tokens, 4)), 0.0) << "bf16 did round";
  }
}

TEST(DecodeLayer, RejectsRowsThatDoNotMatchTheConfig) {
  const ModelWeights w = make_synthetic_weights(small_synthetic(SyntheticArch::llama, 18));
  const Transformer m(w);
  auto never = [](const at::Tensor&, const at::Tensor&, const at::Tensor&) -> at::Tensor {
    ADD_FAILURE() << "attention called on bad input";
    return {};
  };
  const at::Tensor x = at::zeros({2, w.config.hidden_size});
  EXPECT_THROW(decode_layer(m.layer(0), m.config(), m.rope(), at::zeros({2, 5}), {0, 0}, never),
               oal::Error);
  EXPECT_THROW(decode_layer(m.layer(0), m.config(), m.rope(), x, {0}, never), oal::Error);
  EXPECT_THROW(decode_layer(m.layer(0), m.config(), m.rope(), x.to(at::kDouble), {0, 0}, never),
               oal::Error);
  EXPECT_THROW(decode_layer(m.layer(0), m.config(), m.rope(), x, {0, -1}, never), oal::Error);
  // An attention that returns the wrong shape is named, not read out of bounds.
  auto wrong = [](const at::Tensor& q, const at::Tensor&, const at::Tensor&) {
    return q.narrow(1, 0, 1);
  };
  try {
    decode_layer(m.layer(0), m.config(), m.rope(), x, {0, 1}, wrong);
    ADD_FAILURE() << "no error";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("decode layer"), std::string::npos) << e.what();
  }
}

TEST(Rope, RotateRowsEqualsApplyRows) {
  // Both styles and a Llama-3 scaling, positions up to 100000: the angles are the same
  // fp64 values rounded once, so the rotations agree to an ulp of the inputs (FMA).
  for (RopeStyle style : {RopeStyle::half, RopeStyle::adjacent}) {
    for (bool scaled : {false, true}) {
      std::optional<RopeScaling> s;
      if (scaled) s = RopeScaling{8.0, 1.0, 4.0, 8192};
      const Rope rope(16, 500000.0, style, s);
      const std::vector<int64_t> pos = {0, 1, 77, 100000};
      const at::Tensor x = at::randn({4, 3, 1, 16});
      const at::Tensor ref = rope.apply_rows(x, pos);
      at::Tensor got = x.clone();
      rope.rotate_rows(got.data_ptr<float>(), 4, 3, pos.data());
      EXPECT_LT(max_abs(got - ref), 1e-6 * (1 + max_abs(x))) << "scaled " << scaled;
      EXPECT_GT(max_abs(got - x), 0.1);  // it rotated
    }
  }
}
