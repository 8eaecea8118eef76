// Capture: the recorded tensors equal independent recomputations from the model's own
// weights, compose back into the layer output, and round-trip through the file.
#include <gtest/gtest.h>

#include "common/tiny_model.h"
#include "model/reference_forward.h"
#include "oal/analysis/capture.h"
#include "oal/attention/softmax/softmax.h"
#include "oal/core/error.h"
#include "oal/io/safetensors.h"
#include "oal/model/transformer.h"

using namespace oal::model;

using namespace oal::analysis;
using namespace oal::fixtures;

namespace {

// fp32 quantities recomputed in fp64 from fp32 inputs through one or two GEMMs of inner
// size <= 128 and the attention: rounding is ~1e-6 relative; 1e-4 catches any real error
// (a wrong head, position or missing bias is O(1)).
constexpr double k_tol = 1e-4;

struct Fixture {
  ModelWeights w;
  std::unique_ptr<Transformer> model;
  at::Tensor tokens;
};

Fixture make(SyntheticArch arch) {
  SyntheticOptions o;
  o.architecture = arch;
  o.num_layers = 3;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.planted_scale = 4.0;
  Fixture f;
  f.w = oal::test::synthetic_checkpoint(o, arch == SyntheticArch::qwen2 ? "qwen2" : "llama");
  f.model = std::make_unique<Transformer>(f.w);
  f.tokens = oal::test::test_tokens(3, 24, f.w.config.vocab_size, 11);
  return f;
}

at::Tensor W(const ModelWeights& w, const std::string& n) {
  return w.tensors.at(n).to(at::kDouble);
}

}  // namespace

TEST(Capture, ShapesAndModelOutputUnchanged) {
  Fixture f = make(SyntheticArch::qwen2);
  CaptureOptions o;
  o.layers = {2, 0};
  o.batch = 2;  // 3 sequences → batches of 2 and 1, concatenated
  int64_t last_done = 0;
  o.progress = [&](int64_t done, int64_t total, std::string_view, std::string_view) {
    EXPECT_EQ(total, 3);
    last_done = done;
  };
  const Capture c = capture(*f.model, f.tokens, o);
  EXPECT_EQ(last_done, 3);
  const auto& cfg = f.w.config;
  ASSERT_EQ(c.layers.size(), 2u);
  for (int64_t l : {0, 2}) {
    const LayerCapture& lc = c.layers.at(l);
    EXPECT_EQ(lc.q.sizes(), (std::vector<int64_t>{3, cfg.num_heads, 24, cfg.head_dim}));
    EXPECT_EQ(lc.k.sizes(), (std::vector<int64_t>{3, cfg.num_kv_heads, 24, cfg.head_dim}));
    EXPECT_EQ(lc.v.sizes(), (std::vector<int64_t>{3, cfg.num_kv_heads, 24, cfg.head_dim}));
    EXPECT_EQ(lc.head_out.sizes(), (std::vector<int64_t>{3, cfg.num_heads, 24, cfg.head_dim}));
    EXPECT_EQ(lc.wo.sizes(), (std::vector<int64_t>{cfg.hidden_size, cfg.num_heads * cfg.head_dim}));
    EXPECT_EQ(lc.resid.sizes(), (std::vector<int64_t>{3, 24, cfg.hidden_size}));
  }
  EXPECT_EQ(c.metadata.at("format"), "oal-capture");
  EXPECT_EQ(c.metadata.at("layers"), "2,0");
}

// An attention method that must never run: installed past the captured layer, it proves
// the forward stopped early.
class MustNotRun : public oal::attn::AttentionMethod {
 public:
  std::string name() const override { return "must-not-run"; }
  at::Tensor forward(const at::Tensor&, const at::Tensor&, const at::Tensor&) const override {
    throw std::runtime_error("the forward ran past the deepest captured layer");
  }
  std::unique_ptr<oal::attn::DecodeState> new_state(int64_t) const override { return nullptr; }
};

TEST(Capture, StopsAfterTheDeepestRequestedLayer) {
  Fixture f = make(SyntheticArch::llama);
  const Capture full = capture(*f.model, f.tokens, CaptureOptions{{1}});
  f.model->set_attention(2, std::make_shared<MustNotRun>());
  CaptureOptions o;
  o.layers = {1};
  const Capture c = capture(*f.model, f.tokens, o);  // would throw if layer 2 ran
  EXPECT_TRUE(at::equal(c.layers.at(1).resid, full.layers.at(1).resid));
  o.layers = {2};
  EXPECT_THROW(capture(*f.model, f.tokens, o), std::runtime_error) << "layer 2 does run when asked";
}

TEST(Capture, TensorsEqualIndependentRecomputation) {
  for (SyntheticArch arch : {SyntheticArch::qwen2, SyntheticArch::llama}) {
    Fixture f = make(arch);
    const auto& cfg = f.w.config;
    CaptureOptions o;
    o.layers = {0, 1, 2};
    const Capture c = capture(*f.model, f.tokens, o);
    const auto inv = oal::test::reference_inv_freq(cfg);
    const int64_t N = 3, T = 24, D = cfg.head_dim, Hq = cfg.num_heads, Hkv = cfg.num_kv_heads;
    for (int64_t l = 1; l <= 2; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const LayerCapture& prev = c.layers.at(l - 1);
      const LayerCapture& cur = c.layers.at(l);
      // Layer input = previous layer's residual output.
      const at::Tensor x = prev.resid.to(at::kDouble);  // [N, T, hidden]
      const at::Tensor h = x * at::rsqrt(x.pow(2).mean(-1, true) + cfg.rms_norm_eps) *
                           W(f.w, p + "input_layernorm.weight");
      auto proj = [&](const std::string& n, int64_t heads) {
        at::Tensor y = at::matmul(h, W(f.w, p + n + ".weight").t());
        if (cfg.attention_bias) y = y + W(f.w, p + n + ".bias");
        return y.view({N, T, heads, D}).permute({0, 2, 1, 3}).contiguous();
      };
      at::Tensor q = proj("self_attn.q_proj", Hq), k = proj("self_attn.k_proj", Hkv);
      const at::Tensor v = proj("self_attn.v_proj", Hkv);
      for (at::Tensor* t : {&q, &k})
        for (int64_t n = 0; n < N; ++n)
          for (int64_t hh = 0; hh < t->size(1); ++hh)
            for (int64_t pos = 0; pos < T; ++pos)
              oal::test::reference_rotate((*t)[n][hh][pos].data_ptr<double>(), D, pos, inv, false);
      EXPECT_TRUE(at::allclose(cur.q.to(at::kDouble), q, k_tol, k_tol)) << "q layer " << l;
      EXPECT_TRUE(at::allclose(cur.k.to(at::kDouble), k, k_tol, k_tol)) << "k layer " << l;
      EXPECT_TRUE(at::allclose(cur.v.to(at::kDouble), v, k_tol, k_tol)) << "v layer " << l;
      // head_out = exact softmax attention of the captured q, k, v (fp64 reference).
      const at::Tensor y = oal::attn::softmax_attention_naive(
          cur.q.to(at::kDouble), cur.k.to(at::kDouble), cur.v.to(at::kDouble));
      EXPECT_TRUE(at::allclose(cur.head_out.to(at::kDouble), y, k_tol, k_tol)) << "head_out " << l;
      // wo is the checkpoint's o_proj, and x + head_out·Woᵀ + MLP(...) = the layer output.
      EXPECT_TRUE(at::equal(cur.wo, f.w.tensors.at(p + "self_attn.o_proj.weight").to(at::kFloat)));
      const at::Tensor attn =
          at::matmul(cur.head_out.to(at::kDouble).permute({0, 2, 1, 3}).reshape({N, T, Hq * D}),
                     cur.wo.to(at::kDouble).t());
      const at::Tensor mid = x + attn;
      const at::Tensor h2 = mid * at::rsqrt(mid.pow(2).mean(-1, true) + cfg.rms_norm_eps) *
                            W(f.w, p + "post_attention_layernorm.weight");
      const at::Tensor g = at::matmul(h2, W(f.w, p + "mlp.gate_proj.weight").t());
      const at::Tensor u = at::matmul(h2, W(f.w, p + "mlp.up_proj.weight").t());
      const at::Tensor out =
          mid + at::matmul(g * at::sigmoid(g) * u, W(f.w, p + "mlp.down_proj.weight").t());
      EXPECT_TRUE(at::allclose(cur.resid.to(at::kDouble), out, k_tol, k_tol)) << "resid " << l;
    }
  }
}

TEST(Capture, LastLayerResidualGivesTheModelLogits) {
  Fixture f = make(SyntheticArch::llama);
  CaptureOptions o;
  o.layers = {2};
  const Capture c = capture(*f.model, f.tokens, o);
  const at::Tensor h =
      rms_norm(c.layers.at(2).resid, f.w.tensors.at("model.norm.weight").to(at::kFloat),
               f.w.config.rms_norm_eps);
  const at::Tensor logits = f.model->logits(h);
  const at::Tensor want = f.model->forward(f.tokens);
  // Same fp32 operations, but capture ran one sequence per forward and this forward all
  // three: GEMM blocking may differ, so allow fp32 rounding relative to the logit scale.
  const double scale = want.abs().max().item<double>();
  EXPECT_LT((logits - want).abs().max().item<double>(), 1e-5 * scale + 1e-6) << "scale " << scale;
}

TEST(Capture, FileRoundTripKeepsNamesShapesAndMetadata) {
  Fixture f = make(SyntheticArch::qwen2);
  CaptureOptions o;
  o.layers = {1};
  o.resid = false;
  Capture c = capture(*f.model, f.tokens, o);
  c.metadata["ctx"] = "24";
  const auto path = oal::test::make_temp_dir("model_file") / "cap.safetensors";
  write_capture(path, c);
  const auto header = oal::io::read_safetensors_header(path);
  std::vector<std::string> names;
  for (const auto& [n, e] : header.tensors) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"layers.1.head_out", "layers.1.k", "layers.1.q",
                                             "layers.1.v", "layers.1.wo", "tokens"}));
  const Capture r = read_capture(path);
  EXPECT_TRUE(at::equal(r.tokens, c.tokens));
  EXPECT_TRUE(at::equal(r.layers.at(1).q, c.layers.at(1).q));
  EXPECT_TRUE(at::equal(r.layers.at(1).head_out, c.layers.at(1).head_out));
  EXPECT_TRUE(at::equal(r.layers.at(1).wo, c.layers.at(1).wo));
  EXPECT_FALSE(r.layers.at(1).resid.defined());
  EXPECT_EQ(r.metadata.at("ctx"), "24");
  EXPECT_EQ(r.metadata.at("num_kv_heads"), "2");
}

TEST(Capture, RejectsBadInput) {
  Fixture f = make(SyntheticArch::llama);
  CaptureOptions o;
  EXPECT_THROW(capture(*f.model, f.tokens, o), oal::Error);  // no layers
  o.layers = {3};
  EXPECT_THROW(capture(*f.model, f.tokens, o), oal::Error);  // out of range
  o.layers = {1, 1};
  EXPECT_THROW(capture(*f.model, f.tokens, o), oal::Error);  // repeated
  o.layers = {1};
  o.batch = 0;
  EXPECT_THROW(capture(*f.model, f.tokens, o), oal::Error);
  // A safetensors file that is not a capture.
  const auto path = oal::test::make_temp_dir("model_notcap") / "x.safetensors";
  oal::io::write_safetensors(path, {{"a", at::zeros({2})}});
  EXPECT_THROW(read_capture(path), oal::Error);
}
