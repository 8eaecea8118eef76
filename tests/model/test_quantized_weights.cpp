// Transformers holding their weights quantized (--weights, model/weight_format.h):
// the real SmolLM2-135M GGUF kept as stored (Q4_1 layers, Q8_0 tied embedding) against
// the same file dequantized to fp32, and float checkpoints converted to Q8_0 / bf16
// against fp32. The quantized path's own agreement with llama.cpp is checked in
// tests/eval/test_smollm2_llamacpp.cpp, which loads the model this way.
#include <gtest/gtest.h>

#include "common/shared_data.h"
#include "oal/core/error.h"
#include "oal/fixtures/synthetic.h"
#include "oal/formats/fingerprint.h"
#include "oal/formats/load.h"
#include "oal/io/gguf_quants.h"
#include "oal/model/transformer.h"

using namespace oal;
using model::WeightFormat;

namespace {

constexpr const char* k_model = "SmolLM2-135M-Instruct.Q4_1.gguf";

at::Tensor prompt_tokens(int64_t n, int64_t vocab) {
  return (at::arange(n, at::kLong) * 7919 + 13).remainder(vocab).unsqueeze(0);
}

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }

// A float checkpoint of two small layers whose every matrix has whole blocks of 32
// (hidden 64; down_proj has 96 inputs: 3 blocks).
model::ModelWeights two_layer_synthetic(uint64_t seed) {
  fixtures::SyntheticOptions o;
  o.hidden_size = 64;
  o.intermediate_size = 96;
  o.num_layers = 2;
  o.seed = seed;
  return fixtures::make_synthetic_weights(o);
}

}  // namespace

TEST(QuantizedWeights, SmolLM2KeptAsStoredMatchesItsFp32Copy) {
  const auto path = test::model_cache_file(k_model);
  OAL_REQUIRE_PATH(path, "model file (scripts/fetch-models.sh)");
  const model::ModelWeights q = formats::load_model(path.string(), {.keep_quantized = true});
  // Every projection and the embedding stay in their file types.
  ASSERT_EQ(q.quantized.size(), size_t(30 * 7 + 1));
  EXPECT_EQ(q.quantized.at("model.embed_tokens.weight").type, uint32_t(io::GgmlType::Q8_0));
  EXPECT_EQ(q.quantized.at("model.layers.0.self_attn.q_proj.weight").type,
            uint32_t(io::GgmlType::Q4_1));
  const model::ModelWeights f = formats::load_model(path.string());
  EXPECT_EQ(formats::model_fingerprint(q), formats::model_fingerprint(f));

  const model::Transformer mq(q), mf(f);
  EXPECT_EQ(mq.num_parameters(), mf.num_parameters());
  // Q4_1 is 5 bits per weight, Q8_0 8.5: under a fifth of fp32's bytes.
  EXPECT_LT(mq.weight_bytes(), mf.weight_bytes() / 5);
  EXPECT_TRUE(mq.embed_tokens().quant.defined());
  EXPECT_TRUE(mq.lm_head().quant.defined());  // tied: the same Q8_0 table

  // Decoded rows are exactly the dequantized ones (io::dequantize's values).
  const at::Tensor idx = at::tensor({0, 1, 17, 49151}, at::kLong);
  EXPECT_TRUE(mq.embedding_rows(idx).equal(mf.embedding_rows(idx)));

  // The same weight values, summed in another order (T = 1: blocks of 32 in registers
  // vs the fp32 streaming pass; T = 24: decoded panels through the same fp32 GEMM): fp32
  // rounding differences only, carried through 30 layers. Measured (AVX-512): 3e-5 at
  // T = 1, 0 at T = 24, on logits up to 31; 2e-2 leaves room for other SIMD targets and
  // thread counts while any decoding error (a wrong nibble, scale or row permutation)
  // moves logits by whole units.
  for (int64_t T : {1, 24}) {  // T = 1: the decode pass; 24: the prefill panels
    const at::Tensor tokens = prompt_tokens(T, q.config.vocab_size);
    const at::Tensor a = mq.forward(tokens), b = mf.forward(tokens);
    EXPECT_LT(max_abs(a - b), 2e-2) << "T=" << T << ", logits up to " << max_abs(b);
    EXPECT_TRUE(a.argmax(-1).equal(b.argmax(-1))) << "T=" << T;
  }
}

TEST(QuantizedWeights, FloatCheckpointConvertsToQ8_0AndBf16) {
  const model::ModelWeights w = two_layer_synthetic(5);
  const model::Transformer f(w), q8(w, {.weights = WeightFormat::q8_0}),
      bf(w, {.weights = WeightFormat::bf16});
  EXPECT_TRUE(q8.layer(0).q_proj.quant.defined());
  EXPECT_TRUE(q8.layer(1).down_proj.quant.defined());
  EXPECT_TRUE(q8.lm_head().quant.defined());
  EXPECT_FALSE(f.layer(0).q_proj.quant.defined());
  EXPECT_EQ(bf.layer(0).up_proj.weight.scalar_type(), at::kBFloat16);
  // Q8_0: 34 bytes per 32 weights (norms stay fp32); bf16: 2 bytes per weight.
  EXPECT_LT(q8.weight_bytes(), f.weight_bytes() * 3 / 10);
  EXPECT_LT(bf.weight_bytes(), f.weight_bytes() * 6 / 10);
  EXPECT_EQ(q8.num_parameters(), f.num_parameters());

  const at::Tensor tokens = prompt_tokens(16, w.config.vocab_size);
  const at::Tensor ref = f.forward(tokens);
  // Q8_0 rounds each weight to within half a step of max|block| / 127 (0.4% of the
  // block's largest weight), bf16 to 2^-9 relative: a few tenths of a percent of the
  // logit scale after two layers; 3% of max |logit| separates that from a broken path
  // (a wrong row, scale or block order moves logits by their own magnitude).
  const double scale = max_abs(ref);
  EXPECT_LT(max_abs(q8.forward(tokens) - ref), 0.03 * scale);
  EXPECT_LT(max_abs(bf.forward(tokens) - ref), 0.03 * scale);
  EXPECT_GT(max_abs(q8.forward(tokens) - ref), 0.0);  // it did quantize
}

// The decode route is a property of the model, chosen when it is built: every projection
// and the lm_head carry TransformerOptions::quant_dot, and the int8 route's activation
// rounding shows in passes of at most 32 rows only (prefill panels always dequantize).
TEST(QuantizedWeights, QuantDotIsChosenWhenTheModelIsBuilt) {
  const model::ModelWeights w = two_layer_synthetic(7);
  const model::Transformer exact(w, {.weights = WeightFormat::q8_0}),
      int8(w, {.weights = WeightFormat::q8_0, .quant_dot = simd::QuantDot::int8});
  for (int64_t i = 0; i < 2; ++i)
    for (const model::Linear* l :
         {&int8.layer(i).q_proj, &int8.layer(i).k_proj, &int8.layer(i).v_proj,
          &int8.layer(i).o_proj, &int8.layer(i).gate_proj, &int8.layer(i).up_proj,
          &int8.layer(i).down_proj}) {
      EXPECT_EQ(l->quant_dot, simd::QuantDot::int8) << "layer " << i;
      EXPECT_EQ(exact.layer(i).q_proj.quant_dot, simd::QuantDot::dequant);
    }
  EXPECT_EQ(int8.lm_head().quant_dot, simd::QuantDot::int8);
  // 8 tokens: every projection a pass of 8 rows (the int8 route); 40 tokens: panels.
  const at::Tensor few = prompt_tokens(8, w.config.vocab_size),
                   many = prompt_tokens(40, w.config.vocab_size);
  const at::Tensor ref = exact.forward(few);
  // int8 activations move each product by at most max|x_block| / 254 per element: well
  // under 3 % of the logit scale after two layers, and not exactly zero.
  EXPECT_GT(max_abs(int8.forward(few) - ref), 0.0);
  EXPECT_LT(max_abs(int8.forward(few) - ref), 0.03 * max_abs(ref));
  EXPECT_TRUE(at::equal(int8.forward(many), exact.forward(many)));
}

TEST(QuantizedWeights, Q8_0KeepsWeightsItCannotBlockAsFp32) {
  fixtures::SyntheticOptions o;
  o.hidden_size = 64;
  o.intermediate_size = 72;  // down_proj's 72 inputs are not whole blocks of 32
  o.seed = 6;
  const model::Transformer q8(fixtures::make_synthetic_weights(o), {.weights = WeightFormat::q8_0});
  EXPECT_TRUE(q8.layer(0).gate_proj.quant.defined());
  EXPECT_FALSE(q8.layer(0).down_proj.quant.defined());
  EXPECT_EQ(q8.layer(0).down_proj.weight.scalar_type(), at::kFloat);
}

TEST(QuantizedWeights, UnknownFormatIsNamed) {
  EXPECT_EQ(model::parse_weight_format("q8_0"), WeightFormat::q8_0);
  EXPECT_EQ(model::weight_format_name(WeightFormat::automatic), "auto");
  try {
    model::parse_weight_format("q4");
    ADD_FAILURE() << "q4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[weights] unknown weight format 'q4'; expected auto"),
              std::string::npos)
        << e.what();
  }
}
