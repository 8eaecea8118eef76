// The fast-path report (model/fast_paths.h): each op's path and reason, read from what
// the built model holds, agrees with where the calls really go (decode_layer_can_run,
// the methods' own blockers) across weight formats, adapters, options and attention
// methods.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/tiny_model.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/registry.h"
#include "oal/fixtures/synthetic.h"
#include "oal/model/decode_layer.h"
#include "oal/model/fast_paths.h"
#include "oal/model/transformer.h"

using namespace oal::model;
using oal::attn::PathChoice;
using oal::fixtures::make_synthetic_weights;
using oal::fixtures::SyntheticArch;
using oal::test::small_synthetic;

namespace {

// The entry for `op` that holds `layer` (layer -1: a model-wide op); fails when none.
PathChoice path_of(const std::vector<FastPath>& paths, const std::string& op, int64_t layer) {
  for (const FastPath& f : paths) {
    bool has_op = false;
    for (size_t at = 0; (at = f.op.find(op, at)) != std::string::npos; at += op.size()) {
      const size_t end = at + op.size();
      has_op = has_op || ((at == 0 || f.op[at - 1] == ' ') &&
                          (end == f.op.size() || f.op[end] == ','));
    }
    if (!has_op) continue;
    if (layer < 0 && f.layers.empty()) return f.path;
    for (int64_t l : f.layers)
      if (l == layer) return f.path;
  }
  ADD_FAILURE() << "no entry for " << op << " at layer " << layer;
  return {};
}

// Every (op, layer) pair is in exactly one entry.
void expect_each_once(const std::vector<FastPath>& paths, int64_t layers) {
  for (const char* op : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                         "down_proj", "decode step", "attention"})
    for (int64_t l = 0; l < layers; ++l) {
      int n = 0;
      for (const FastPath& f : paths)
        if (f.op.find(op) != std::string::npos)
          for (int64_t x : f.layers) n += x == l;
      EXPECT_EQ(n, 1) << op << " layer " << l;
    }
}

}  // namespace

TEST(FastPaths, PlainFp32ModelRunsSimdEverywhereInOneEntryPerOp) {
  const ModelWeights w = make_synthetic_weights(small_synthetic(SyntheticArch::llama, 21));
  const Transformer m(w);
  const std::vector<FastPath> paths = fast_paths(m);
  expect_each_once(paths, m.num_layers());
  // The seven projections share one path on every layer: one entry.
  ASSERT_EQ(paths.size(), 4u) << paths[0].op;
  EXPECT_EQ(paths[0].op, "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj");
  EXPECT_EQ(paths[0].layers.size(), static_cast<size_t>(m.num_layers()));
  for (const FastPath& f : paths) EXPECT_TRUE(f.path.simd) << f.op << ": " << f.path.reason;
  EXPECT_NE(paths[0].path.detail.find("fp32 GEMM"), std::string::npos) << paths[0].path.detail;
  EXPECT_EQ(path_of(paths, "attention", 0).detail, "flash, KV cache f32");
  EXPECT_TRUE(path_of(paths, "lm_head", -1).simd);
}

TEST(FastPaths, WeightFormatsAndQuantDotAreNamed) {
  const ModelWeights w = make_synthetic_weights(small_synthetic(SyntheticArch::llama, 22));
  const auto q8 = fast_paths(Transformer(w, {.weights = WeightFormat::q8_0}));
  EXPECT_EQ(path_of(q8, "q_proj", 0).detail, "Q8_0 blocks, dequant dot when decoding");
  const auto int8 = fast_paths(
      Transformer(w, {.weights = WeightFormat::q8_0, .quant_dot = oal::simd::QuantDot::int8}));
  EXPECT_EQ(path_of(int8, "down_proj", 1).detail, "Q8_0 blocks, int8 dot when decoding");
  const auto bf16 = fast_paths(Transformer(w, {.weights = WeightFormat::bf16}));
  EXPECT_TRUE(path_of(bf16, "up_proj", 0).simd);
  EXPECT_EQ(path_of(bf16, "up_proj", 0).detail, "BFloat16 rows widened in registers");
  const auto f16 = fast_paths(Transformer(w, {.kv_cache = oal::attn::KvCacheType::f16}));
  EXPECT_EQ(path_of(f16, "attention", 1).detail, "flash, KV cache f16");
}

TEST(FastPaths, AnAdapterMovesItsLayersDecodeStepOffTheRowsAndSaysWhy) {
  const ModelWeights w = make_synthetic_weights(small_synthetic(SyntheticArch::llama, 23));
  struct Shift : LinearDelta {
    at::Tensor apply(const at::Tensor& x) const override { return x.narrow(-1, 0, 1) * 0; }
  };
  Transformer m(w);
  m.layer(1).o_proj.delta = std::make_shared<Shift>();
  const std::vector<FastPath> paths = fast_paths(m);
  expect_each_once(paths, m.num_layers());
  // The projection itself still runs its GEMM, with the adapter added through ATen.
  EXPECT_TRUE(path_of(paths, "o_proj", 1).simd);
  EXPECT_NE(path_of(paths, "o_proj", 1).detail.find("+ adapter"), std::string::npos);
  EXPECT_EQ(path_of(paths, "o_proj", 0).detail.find("adapter"), std::string::npos);
  // The row decode step cannot take that layer, and the report names the projection.
  const PathChoice step1 = path_of(paths, "decode step", 1);
  EXPECT_FALSE(step1.simd);
  EXPECT_NE(step1.reason.find("o_proj: an adapter"), std::string::npos) << step1.reason;
  // The report and the dispatch agree on every layer.
  for (int64_t l = 0; l < m.num_layers(); ++l)
    EXPECT_EQ(path_of(paths, "decode step", l).simd,
              decode_layer_can_run(m.layer(l), at::zeros({1, w.config.hidden_size})))
        << "layer " << l;
  const auto off = fast_paths(Transformer(w, {.rowwise_decode = false}));
  EXPECT_FALSE(path_of(off, "decode step", 0).simd);
  EXPECT_NE(path_of(off, "decode step", 0).reason.find("rowwise_decode"), std::string::npos);
}

TEST(FastPaths, AttentionMethodsReportTheirOwnPaths) {
  const ModelWeights w = make_synthetic_weights(small_synthetic(SyntheticArch::llama, 24));
  const ModelConfig& c = w.config;
  const oal::attn::MethodShape plain{0, c.num_heads, c.num_kv_heads, c.head_dim};
  oal::attn::MethodShape windowed = plain;
  windowed.window = {4, 8};
  Transformer m(w);
  ASSERT_GE(m.num_layers(), 2);
  const auto global = oal::attn::make_method("global", plain, 0, nullptr);
  m.set_attention(0, global);
  m.set_attention(1, oal::attn::make_method("performer", windowed, 0, nullptr));
  auto paths = fast_paths(m);
  EXPECT_TRUE(path_of(paths, "attention", 0).simd);
  EXPECT_NE(path_of(paths, "attention", 0).detail.find("HD state"), std::string::npos);
  const PathChoice perf = path_of(paths, "attention", 1);
  EXPECT_FALSE(perf.simd);
  EXPECT_NE(perf.reason.find("feature-map"), std::string::npos) << perf.reason;
  // The global kernel with the ATen backend asked for, and a plain baseline.
  const auto& kernels = dynamic_cast<const oal::attn::QuadraticAttention&>(*global).kernels();
  m.set_attention(0, std::make_shared<oal::attn::QuadraticAttention>(
                         kernels, oal::attn::HdOptions{.backend = oal::attn::HdBackend::aten}));
  m.set_attention(1, oal::attn::make_method("performer", plain, 0, nullptr));
  paths = fast_paths(m);
  EXPECT_EQ(path_of(paths, "attention", 0).reason, "the ATen backend was requested");
  EXPECT_NE(path_of(paths, "attention", 1).reason.find("no SIMD code (performer)"),
            std::string::npos);
  // Windowed OAL-family and windowed-only layers run on the CPU kernels.
  m.set_attention(0, oal::attn::make_method("global", windowed, 0, nullptr));
  m.set_attention(1, oal::attn::make_method("window", windowed, 0, nullptr));
  paths = fast_paths(m);
  EXPECT_TRUE(path_of(paths, "attention", 0).simd);
  EXPECT_NE(path_of(paths, "attention", 0).detail.find("4 sinks and 8 recent keys exact, HD state"),
            std::string::npos)
      << path_of(paths, "attention", 0).detail;
  EXPECT_NE(path_of(paths, "attention", 1).detail.find("windowed-only"), std::string::npos);
}
