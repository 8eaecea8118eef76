// Model fingerprints and the checks `oal convert` / `oal finetune` make on a calibration
// run before any work: another model, an uncalibrated method or layer, a layer out of
// range — each a clear error naming the mismatch.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "common/tiny_model.h"
#include "oal/adapt/hybrid.h"
#include "oal/analysis/layer_scores.h"
#include "oal/attention/baselines/taylorshift.h"
#include "oal/attention/method_store.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/oal/quadratic.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/convert/convert.h"
#include "oal/convert/convert_run.h"
#include "oal/core/error.h"
#include "oal/formats/converted.h"
#include "oal/formats/fingerprint.h"
#include "oal/io/json_file.h"
#include "oal/model/transformer.h"

namespace oal::convert {
namespace {

// A calibration run (its method store) of `weights` holding Taylor-initialised OAL
// kernels for layer 1.
void write_oal_run(const std::filesystem::path& dir, const model::ModelWeights& weights) {
  const auto& c = weights.config;
  std::vector<attn::QuadraticKernel> heads;
  for (int64_t h = 0; h < c.num_heads; ++h)
    heads.push_back(attn::QuadraticKernel::taylor({{0, 1, 2, 3, 4, 5}, {6, 7}}));
  attn::MethodStore run;
  run.methods = {"oal"};
  run.kernels["oal"].head_dim = c.head_dim;
  run.kernels["oal"].layers[1] = heads;
  run.layers.push_back({1, {{"oal", std::make_shared<attn::QuadraticAttention>(
                                        attn::QuadraticAttention::from_kernels(heads, {}, false))}}});
  run.meta = {{"model", "tiny"}, {"model_fingerprint", formats::model_fingerprint(weights)}};
  attn::write_method_store(dir, run);
}

// A run of `weights` for layer 1 holding OAL (groups {0..5}, {6, 7}; 3 + s + s²/2)
// and TaylorShift calibrated to tau = 2.5 on every head.
void write_two_method_run(const std::filesystem::path& dir, const model::ModelWeights& weights) {
  const auto& c = weights.config;
  std::vector<attn::QuadraticKernel> heads;
  for (int64_t h = 0; h < c.num_heads; ++h) {
    heads.push_back(attn::QuadraticKernel::global({{0, 1, 2, 3, 4, 5}, {6, 7}}, 3.0, 1.0, 0.5));
  }
  attn::MethodStore run;
  run.methods = {"oal", "taylorshift"};
  run.kernels["oal"].head_dim = c.head_dim;
  run.kernels["oal"].layers[1] = heads;
  auto ts = std::make_shared<attn::TaylorShiftAttention>(
      at::full({c.num_heads}, 2.5, at::kFloat), c.num_kv_heads, c.head_dim);
  run.layers.push_back({1, {{"oal", std::make_shared<attn::QuadraticAttention>(
                                        attn::QuadraticAttention::from_kernels(heads, {}, false))},
                            {"taylorshift", ts}}});
  run.meta = {{"model", "tiny"}, {"model_fingerprint", formats::model_fingerprint(weights)}};
  attn::write_method_store(dir, run);
}

using test::error_of;

TEST(Fingerprint, IdentifiesTheEmbeddingNotTheAdaptedAttention) {
  const auto a = test::tiny_weights(1), b = test::tiny_weights(2);
  const std::string fa = formats::model_fingerprint(a);
  EXPECT_EQ(fa.rfind("oal-", 0), 0u) << fa;
  EXPECT_EQ(fa, formats::model_fingerprint(test::tiny_weights(1)));  // deterministic
  EXPECT_NE(fa, formats::model_fingerprint(b));                      // same shapes, other weights
  auto merged = a;  // LoRA merged into q_proj: the base model is still the same
  merged.tensors["model.layers.0.self_attn.q_proj.weight"] =
      a.tensors.at("model.layers.0.self_attn.q_proj.weight") + 0.1;
  EXPECT_EQ(fa, formats::model_fingerprint(merged));
  auto bf16 = a;  // a bf16 copy of bf16-exact values keeps the fingerprint
  for (auto& [n, t] : bf16.tensors) t = t.to(at::kBFloat16);
  auto a_rounded = a;
  for (auto& [n, t] : a_rounded.tensors) t = t.to(at::kBFloat16).to(at::kFloat);
  EXPECT_EQ(formats::model_fingerprint(bf16), formats::model_fingerprint(a_rounded));
  auto deeper = test::tiny_weights(1, 4);  // architecture numbers are part of it
  EXPECT_NE(fa, formats::model_fingerprint(deeper));
  auto missing = a;
  missing.tensors.erase("model.embed_tokens.weight");
  EXPECT_NE(error_of([&] { formats::model_fingerprint(missing); }).find("[model_fingerprint]"),
            std::string::npos);
}

TEST(ConvertChecks, CalibrationRunOfAnotherModelIsRejected) {
  const auto dir = test::make_temp_dir("convert_run");
  const auto a = test::tiny_weights(1), b = test::tiny_weights(2);
  write_oal_run(dir, a);
  const auto ok = methods_from_calibration(dir, a, "oal", {1}, false);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok.at(1)->name(), "oal");
  const std::string other = error_of([&] { methods_from_calibration(dir, b, "oal", {1}, false); });
  EXPECT_NE(other.find("[convert]"), std::string::npos) << other;
  EXPECT_NE(other.find("another model"), std::string::npos) << other;
  const std::string layer = error_of([&] { methods_from_calibration(dir, a, "oal", {2}, false); });
  EXPECT_NE(layer.find("layer 2 was not calibrated"), std::string::npos) << layer;
  const std::string range = error_of([&] { methods_from_calibration(dir, a, "oal", {7}, false); });
  EXPECT_NE(range.find("out of range"), std::string::npos) << range;
  const std::string method =
      error_of([&] { methods_from_calibration(dir, a, "performer", {1}, false); });
  EXPECT_NE(method.find("no 'performer'"), std::string::npos) << method;
  std::filesystem::remove_all(dir);
}

TEST(KernelInit, BaselinesStartFromInitialValuesOalAndGlobalFromCalibration) {
  for (const char* m : {"taylorshift", "performer", "dijiang", "spectraformer"}) {
    EXPECT_FALSE(starts_from_calibration(m, KernelInit::initial)) << m;
    EXPECT_TRUE(starts_from_calibration(m, KernelInit::calibrated)) << m;
  }
  for (const char* m : {"oal", "global"}) {
    EXPECT_TRUE(starts_from_calibration(m, KernelInit::initial)) << m;
    EXPECT_TRUE(starts_from_calibration(m, KernelInit::calibrated)) << m;
  }
  EXPECT_EQ(parse_kernel_init("initial"), KernelInit::initial);
  EXPECT_EQ(parse_kernel_init("calibrated"), KernelInit::calibrated);
  EXPECT_NE(error_of([] { parse_kernel_init("fitted"); }).find("expected initial or calibrated"),
            std::string::npos);
}

TEST(KernelInit, MethodsFromCalibrationFollowTheRule) {
  const auto dir = test::make_temp_dir("convert_init");
  const auto w = test::tiny_weights(1);
  write_two_method_run(dir, w);
  auto tau_of = [&](KernelInit init) {
    auto m = methods_from_calibration(dir, w, "taylorshift", {1}, true, init).at(1);
    auto* ts = dynamic_cast<attn::TaylorShiftAttention*>(m.get());
    EXPECT_NE(ts, nullptr);
    EXPECT_TRUE(ts->tau().requires_grad());
    return ts->tau().to(at::kDouble);
  };
  EXPECT_TRUE(at::allclose(tau_of(KernelInit::initial), at::ones({w.config.num_heads}, at::kDouble)));
  EXPECT_TRUE(at::allclose(tau_of(KernelInit::calibrated),
                           at::full({w.config.num_heads}, 2.5, at::kDouble)));
  // OAL keeps its calibration (a = 3, not Taylor's 1) under the default `initial`.
  auto m = methods_from_calibration(dir, w, "oal", {1}, false, KernelInit::initial).at(1);
  auto* q = dynamic_cast<attn::QuadraticAttention*>(m.get());
  ASSERT_NE(q, nullptr);
  EXPECT_NEAR(q->to_kernels()[0].coefficients().a, 3.0, 1e-12);
  std::filesystem::remove_all(dir);
}

// Found by fuzz_converted_model: a marker without "method" escaped load_transformer as a
// nlohmann exception. Every malformed marker is now a named error; the intact one loads.
TEST(ConvertedDir, MalformedMarkerIsANamedError) {
  const auto dir = test::make_temp_dir("convert_marker");
  const auto w = test::tiny_weights(1);
  write_oal_run(dir / "run", w);
  model::Transformer t(w);
  adapt::apply_hybrid(t, methods_from_calibration(dir / "run", w, "oal", {1}, false));
  const auto conv = dir / "converted";
  export_converted(conv, w, t, "oal", {1}, "tiny", "");
  ASSERT_NO_THROW(formats::load_transformer(conv.string()));
  const nlohmann::json config = io::read_json_file(conv / "config.json", "test");
  auto with_marker = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json c = config;
    edit(c["oal_conversion"]);
    std::ofstream(conv / "config.json") << c.dump();
    return error_of([&] { formats::load_transformer(conv.string()); });
  };
  for (const auto& [what, edit] :
       std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>>{
           {"no method", [](nlohmann::json& m) { m.erase("method"); }},
           {"method not a string", [](nlohmann::json& m) { m["method"] = 3; }},
           {"float layer", [](nlohmann::json& m) { m["layers"] = {1.5}; }},
           {"layers not an array", [](nlohmann::json& m) { m["layers"] = "1"; }},
           {"not an object", [](nlohmann::json& m) { m = "oal"; }},
           {"format a number", [](nlohmann::json& m) { m["format"] = 1; }}}) {
    EXPECT_NE(with_marker(edit).find("oal_conversion"), std::string::npos) << what;
  }
  std::filesystem::remove_all(dir);
}

// A windowed run converts to windowed layers: the converted directory keeps the window
// and c_h, and reloads as the same attention. --sinks/--window that differ from the run
// are refused; the windowed-only method needs no run.
TEST(ConvertedDir, WindowedLayersKeepTheirWindowAndLogScale) {
  const auto dir = test::make_temp_dir("convert_windowed");
  const auto w = test::tiny_weights(1);
  const auto& c = w.config;
  std::vector<attn::QuadraticKernel> heads;
  for (int64_t h = 0; h < c.num_heads; ++h)
    heads.push_back(attn::QuadraticKernel::taylor({{0, 1, 2, 3, 4, 5}, {6, 7}}).perturbed(0.1, h));
  attn::MethodStore run;
  run.methods = {"oal"};
  run.window = {1, 3};
  run.kernels["oal"].head_dim = c.head_dim;
  run.kernels["oal"].layers[1] = heads;
  auto base = std::make_shared<attn::QuadraticAttention>(attn::QuadraticAttention::from_kernels(heads));
  const at::Tensor log_scale = at::linspace(-1.0, 1.0, c.num_heads, at::kFloat);
  run.layers.push_back({1, {{"oal", std::make_shared<attn::WindowedAttention>(base, run.window, log_scale)}}});
  run.meta = {{"model", "tiny"}, {"model_fingerprint", formats::model_fingerprint(w)}};
  attn::write_method_store(dir / "run", run);

  const auto methods = methods_from_calibration(dir / "run", w, "oal", {1}, false);
  const auto* wa = dynamic_cast<const attn::WindowedAttention*>(methods.at(1).get());
  ASSERT_NE(wa, nullptr);
  EXPECT_EQ(wa->window(), run.window);
  EXPECT_TRUE(at::equal(wa->log_scale(), log_scale));
  const std::string differs = error_of(
      [&] { methods_from_calibration(dir / "run", w, "oal", {1}, false, KernelInit::initial, {2, 3}); });
  EXPECT_NE(differs.find("calibrate with the same --sinks and --window"), std::string::npos) << differs;

  model::Transformer t(w);
  adapt::apply_hybrid(t, methods);
  const auto conv = dir / "converted";
  export_converted(conv, w, t, "oal", {1}, "tiny", "");
  const auto loaded = formats::load_transformer(conv.string());
  EXPECT_EQ(loaded->attention(1).fingerprint(), wa->fingerprint());

  const auto only = methods_from_calibration("", w, "window", {0, 1}, false, KernelInit::initial, {1, 2});
  ASSERT_EQ(only.size(), 2u);
  EXPECT_EQ(only.at(0)->name(), "window");
  EXPECT_NE(error_of([&] { methods_from_calibration("", w, "window", {1}, false); }).find("at least 1 token"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// --layers auto:K: the K scored layers with the least softmax weight beyond the window.
TEST(ConvertPlan, AutoLayersTakeTheLeastAttendingScoredLayers) {
  const auto dir = test::make_temp_dir("convert_auto");
  analysis::LayerScores scores{
      {1, 3}, 64, 2, {{0, {0.4, 0.4}}, {1, {0.1, 0.2}}, {2, {0.05, 0.05}}}};
  std::ofstream(dir / "scores.json") << analysis::layer_scores_to_json(scores).dump();
  ConvertOptions o;
  o.layers = "auto:2";
  o.layer_scores = dir / "scores.json";
  const ConversionPlan p = plan_conversion(o, 3, 1);
  EXPECT_EQ(p.layers, (std::vector<int64_t>{1, 2}));
  EXPECT_NE(p.range_rule.find("auto: the 2 of 3"), std::string::npos) << p.range_rule;
  o.window = {2, 3};
  EXPECT_NE(error_of([&] { plan_conversion(o, 3, 1); }).find("ask for S=2,W=3"), std::string::npos);
  o.window = {};
  EXPECT_NE(error_of([&] { plan_conversion(o, 2, 1); }).find("the model has 2 layers"), std::string::npos);
  o.layers = "auto:two";
  EXPECT_NE(error_of([&] { plan_conversion(o, 3, 1); }).find("expected auto:K"), std::string::npos);
  o.layers = "auto:4";
  EXPECT_NE(error_of([&] { plan_conversion(o, 3, 1); }).find("expected 1 to 3 layers"), std::string::npos);
  o.layers = "auto:2";
  o.layer_scores.clear();
  EXPECT_NE(error_of([&] { plan_conversion(o, 3, 1); }).find("needs --layer-scores"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// --full-heads: retrieval heads kept exact, chosen from the scores or listed, carried
// through export and load (the loaded layer's fingerprint names them).
TEST(ConvertPlan, FullHeadsAreChosenListedAndExported) {
  const auto dir = test::make_temp_dir("convert_full_heads");
  // Two KV heads of two query heads each; retrieval per query head.
  analysis::LayerScores scores{{1, 3}, 64, 2, {}};
  scores.layers = {{0, {0.4, 0.4, 0.1, 0.1}, {0.0, 0.1, 0.2, 0.0}},
                   {1, {0.1, 0.2, 0.3, 0.1}, {0.9, 0.0, 0.05, 0.3}}};
  std::ofstream(dir / "scores.json") << analysis::layer_scores_to_json(scores).dump();
  ConvertOptions o;
  o.method = "window";
  o.layers = "0-1";
  o.layer_scores = dir / "scores.json";
  o.full_heads = "auto:2";
  // KV head scores (max over its query heads): 0:0 0.1, 0:1 0.2, 1:0 0.9, 1:1 0.3.
  ConversionPlan p = plan_conversion(o, 2, 2);
  EXPECT_EQ(describe_full_heads(p.full_heads), "1:0,1:1");
  o.full_heads = "auto:3";
  EXPECT_EQ(describe_full_heads(plan_conversion(o, 2, 2).full_heads), "0:1,1:0,1:1");
  o.layers = "0";  // only layer 0's heads are candidates
  o.full_heads = "auto:1";
  EXPECT_EQ(describe_full_heads(plan_conversion(o, 2, 2).full_heads), "0:1");
  o.full_heads = "auto:3";
  EXPECT_NE(error_of([&] { plan_conversion(o, 2, 2); }).find("expected 1 to 2 kept KV heads"),
            std::string::npos);
  o.layers = "0-1";
  o.full_heads = "1:1,0:0";
  EXPECT_EQ(describe_full_heads(plan_conversion(o, 2, 2).full_heads), "0:0,1:1");
  for (const auto& [spec, needle] : std::vector<std::pair<std::string, std::string>>{
           {"1:2", "KV head 2 does not exist"},
           {"3:0", "layer 3 is not converted"},
           {"1:0,1:0", "ascending without repeats"},
           {"1-0", "LAYER:HEAD"},
           {",", "LAYER:HEAD"},
           {"auto:x", "expected auto:M"}}) {
    o.full_heads = spec;
    EXPECT_NE(error_of([&] { plan_conversion(o, 2, 2); }).find(needle), std::string::npos) << spec;
  }
  o.full_heads = "auto:1";
  scores.layers[0].retrieval.clear();
  scores.layers[1].retrieval.clear();
  std::ofstream(dir / "scores.json") << analysis::layer_scores_to_json(scores).dump();
  EXPECT_NE(error_of([&] { plan_conversion(o, 2, 2); }).find("--retrieval-probes"),
            std::string::npos);
  o.method = "softmax";
  o.full_heads = "0:0";
  EXPECT_NE(error_of([&] { plan_conversion(o, 2, 2); }).find("softmax converts none"),
            std::string::npos);

  // Export and load: the kept heads survive, and a plain (unwindowed) method refuses them.
  const auto w = test::tiny_weights(1);
  auto methods = methods_from_calibration("", w, "window", {1}, false, KernelInit::initial, {1, 2});
  const attn::FullHeads kept{{w.config.num_kv_heads - 1}};
  apply_full_heads(methods, {{1, kept}});
  model::Transformer t(w);
  adapt::apply_hybrid(t, methods);
  export_converted(dir / "converted", w, t, "window", {1}, "tiny", "");
  const auto loaded = formats::load_transformer((dir / "converted").string());
  const auto* wa = dynamic_cast<const attn::WindowedAttention*>(&loaded->attention(1));
  ASSERT_NE(wa, nullptr);
  EXPECT_EQ(wa->full_heads(), kept);
  EXPECT_EQ(loaded->attention(1).fingerprint(), methods.at(1)->fingerprint());
  EXPECT_NE(loaded->attention(1).fingerprint().find("full="), std::string::npos);
  std::map<int64_t, std::shared_ptr<attn::AttentionMethod>> plain{
      {1, attn::TaylorShiftAttention::init(w.config.num_heads, w.config.num_kv_heads,
                                           w.config.head_dim)}};
  EXPECT_NE(error_of([&] { apply_full_heads(plain, {{1, kept}}); }).find("without a window"),
            std::string::npos);
  EXPECT_NE(error_of([&] { apply_full_heads(methods, {{0, kept}}); }).find("not converted"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace oal::convert
