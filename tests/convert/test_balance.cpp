// The balance of a windowed conversion chosen by the model's loss (convert/balance.h):
// each candidate's score is the perplexity of a model built independently with the
// shifted c_h, the lowest wins, the windowed-only candidate is the windowed-only method,
// and bad requests fail before anything is scored.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "common/tiny_model.h"
#include "oal/adapt/hybrid.h"
#include "oal/attention/oal/quadratic.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/registry.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/convert/balance.h"
#include "oal/core/error.h"
#include "oal/eval/perplexity.h"

namespace oal::convert {
namespace {

constexpr attn::Window k_window{1, 3};
constexpr int64_t k_ctx = 16;

// Windowed OAL on layers 1 and 2 of the tiny model: perturbed Taylor kernels (so the
// kernel's part differs from the window's) and per-head c_h.
std::shared_ptr<attn::QuadraticAttention> oal_layer(const model::ModelWeights& w, int64_t l) {
  std::vector<attn::QuadraticKernel> heads;
  for (int64_t h = 0; h < w.config.num_heads; ++h)
    heads.push_back(
        attn::QuadraticKernel::taylor({{0, 1, 2, 3, 4, 5}, {6, 7}}).perturbed(0.3, 10 * l + h));
  return std::make_shared<attn::QuadraticAttention>(attn::QuadraticAttention::from_kernels(heads));
}

LayerMethods windowed_oal(const model::ModelWeights& w) {
  LayerMethods out;
  for (int64_t l : {1, 2})
    out[l] = std::make_shared<attn::WindowedAttention>(
        oal_layer(w, l), k_window, at::tensor({-0.5f + float(l), 0.25f}, at::kFloat));
  return out;
}

std::vector<int32_t> stream(int64_t tokens) {
  std::vector<int32_t> s;
  for (int64_t i = 0; i < tokens; ++i) s.push_back(int32_t((i * 7 + i / 3) % 32));
  return s;
}

// Perplexity of the tiny model with `methods`, built here (not by balance.cpp).
double nll_with(const model::ModelWeights& w, const LayerMethods& methods, int64_t first,
                int64_t blocks) {
  model::Transformer t(w);
  adapt::apply_hybrid(t, methods);
  return eval::perplexity(t, stream(6 * k_ctx), {.ctx = k_ctx, .max_blocks = blocks,
                                                 .first_block = first})
      .nll;
}

// The same layers with c_h set per layer by hand.
LayerMethods with_log_scales(const LayerMethods& methods, const std::function<at::Tensor(at::Tensor)>& f) {
  LayerMethods out;
  for (const auto& [l, m] : methods) {
    const auto& wa = dynamic_cast<const attn::WindowedAttention&>(*m);
    out[l] = std::make_shared<attn::WindowedAttention>(wa.base(), wa.window(), f(wa.log_scale()));
  }
  return out;
}

using test::error_of;

TEST(Balance, OffsetsShiftEveryLogScaleAndLeaveTheInputs) {
  const auto w = test::tiny_weights(3);
  const LayerMethods m = windowed_oal(w);
  const LayerMethods shifted = offset_log_scales(m, 1.5);
  const LayerMethods only = offset_log_scales(m, std::nullopt);
  for (int64_t l : {1, 2}) {
    const auto& in = dynamic_cast<const attn::WindowedAttention&>(*m.at(l));
    const auto& out = dynamic_cast<const attn::WindowedAttention&>(*shifted.at(l));
    // Exact: one fp32 subtraction of a value representable in fp32.
    EXPECT_TRUE(at::equal(out.log_scale(), in.log_scale() - 1.5));
    EXPECT_EQ(out.base(), in.base());  // the kernel is shared, not refitted
    EXPECT_EQ(out.window(), k_window);
    const auto& w_only = dynamic_cast<const attn::WindowedAttention&>(*only.at(l));
    EXPECT_TRUE(at::equal(w_only.log_scale(),
                          at::full({2}, attn::k_window_only_log_scale, at::kFloat)));
  }
  // The inputs keep their c_h.
  const auto& l1 = dynamic_cast<const attn::WindowedAttention&>(*m.at(1));
  EXPECT_TRUE(at::equal(l1.log_scale(), at::tensor({0.5f, 0.25f})));
}

TEST(Balance, RefusesLayersWithoutAKernelBesideAWindow) {
  const auto w = test::tiny_weights(3);
  const auto& c = w.config;
  LayerMethods plain{{1, oal_layer(w, 1)}};
  std::string e = error_of([&] { offset_log_scales(plain, 1.0); });
  EXPECT_NE(e.find("[balance] layer 1 runs 'oal' without a window"), std::string::npos) << e;
  LayerMethods only{{1, attn::make_method("window", {1, c.num_heads, c.num_kv_heads, c.head_dim, k_window}, 0, nullptr)}};
  e = error_of([&] { offset_log_scales(only, 1.0); });
  EXPECT_NE(e.find("windowed-only method: it has no kernel"), std::string::npos) << e;
  e = error_of([&] { offset_log_scales(windowed_oal(w), std::numeric_limits<double>::infinity()); });
  EXPECT_NE(e.find("offset must be finite"), std::string::npos) << e;
}

TEST(Balance, ScoresEachCandidateAsItsOwnModelAndKeepsTheLowest) {
  const auto w = test::tiny_weights(3);
  const LayerMethods m = windowed_oal(w);
  model::Transformer t(w);
  adapt::apply_hybrid(t, m);
  BalanceOptions o{.ctx = k_ctx, .first_block = 2, .blocks = 3, .offsets = {-2, 0, 3}};
  int64_t last_done = 0, calls = 0;
  o.progress = [&](int64_t done, int64_t total, std::string_view, std::string_view) {
    EXPECT_EQ(total, 4 * 3);
    EXPECT_GE(done, last_done);
    last_done = done;
    ++calls;
  };
  const BalanceChoice b = choose_balance(t, m, stream(6 * k_ctx), o);
  ASSERT_EQ(b.scores.size(), 4u);
  EXPECT_EQ(last_done, 12);
  EXPECT_GT(calls, 0);
  size_t lowest = 0;
  for (size_t i = 0; i < 3; ++i) {
    const double d = o.offsets[i];
    EXPECT_EQ(b.scores[i].offset, d);
    const double expect = nll_with(w, with_log_scales(m, [d](at::Tensor c) { return c - d; }), 2, 3);
    // The same model, weights and blocks through the same code: equal to fp32 rounding of
    // the summed NLL (a few ulps of ~3.5 over 45 targets).
    EXPECT_NEAR(b.scores[i].nll, expect, 1e-6) << b.scores[i].describe();
    EXPECT_NEAR(b.scores[i].ppl, std::exp(b.scores[i].nll), 1e-9 * b.scores[i].ppl);
    if (b.scores[i].nll < b.scores[lowest].nll) lowest = i;
  }
  // The windowed-only candidate is the windowed-only method (StreamingLLM's rule): its
  // kernel weighs e^-30 of an exact key per far key, far below fp32 resolution here.
  EXPECT_FALSE(b.scores[3].offset.has_value());
  EXPECT_EQ(b.scores[3].describe(), "window-only");
  const auto& c = w.config;
  LayerMethods rule;
  for (int64_t l : {1, 2})
    rule[l] = attn::make_method("window", {l, c.num_heads, c.num_kv_heads, c.head_dim, k_window}, 0, nullptr);
  EXPECT_NEAR(b.scores[3].nll, nll_with(w, rule, 2, 3), 1e-6);
  // The candidates differ (else the choice would say nothing on this model).
  EXPECT_GT(std::abs(b.scores[0].nll - b.scores[2].nll), 1e-4);
  if (b.scores[3].nll < b.scores[lowest].nll) lowest = 3;
  EXPECT_EQ(b.chosen, lowest);
  // The model ends with the chosen candidate installed.
  const LayerMethods chosen = offset_log_scales(m, b.best().offset);
  EXPECT_EQ(t.attention(1).fingerprint(), chosen.at(1)->fingerprint());
  EXPECT_EQ(t.attention(2).fingerprint(), chosen.at(2)->fingerprint());
}

TEST(Balance, BadRequestsFailBeforeAnythingIsScored) {
  const auto w = test::tiny_weights(3);
  const LayerMethods m = windowed_oal(w);
  model::Transformer t(w);
  bool scored = false;
  auto opts = [&](BalanceOptions o) {
    o.progress = [&](int64_t, int64_t, std::string_view, std::string_view) { scored = true; };
    return o;
  };
  const auto s = stream(6 * k_ctx);  // 6 blocks of 16
  std::string e = error_of([&] { choose_balance(t, m, s, opts({.ctx = k_ctx, .first_block = 4, .blocks = 3})); });
  EXPECT_NE(e.find("[balance] blocks 4-6 of 16 tokens asked, but the text has 96 token(s): 6 complete"),
            std::string::npos) << e;
  e = error_of([&] { choose_balance(t, m, s, opts({.ctx = 1})); });
  EXPECT_NE(e.find("ctx must be >= 2"), std::string::npos) << e;
  e = error_of([&] { choose_balance(t, m, s, opts({.ctx = k_ctx, .blocks = 0})); });
  EXPECT_NE(e.find("blocks must be >= 1"), std::string::npos) << e;
  e = error_of([&] {
    choose_balance(t, m, s, opts({.ctx = k_ctx, .offsets = {0, std::nan("")}}));
  });
  EXPECT_NE(e.find("offsets must be finite"), std::string::npos) << e;
  e = error_of([&] { choose_balance(t, {}, s, opts({.ctx = k_ctx})); });
  EXPECT_NE(e.find("no converted layers"), std::string::npos) << e;
  EXPECT_FALSE(scored);
}

}  // namespace
}  // namespace oal::convert
