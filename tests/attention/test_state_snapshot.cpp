// DecodeState::snapshot / restore for every registered method: a state restored from a
// snapshot into a fresh state continues exactly as the original (same code, same
// numbers: outputs compared for equality), and a snapshot that does not fit is refused.
#include <gtest/gtest.h>

#include <algorithm>

#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/registry.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/core/error.h"
#include "test_util.h"

using namespace oal::attn;

namespace {

constexpr int64_t k_hq = 4, k_hkv = 2, k_d = 8;

// "oal+window": OAL's kernels beside a window of 2 sinks and 5 recent tokens (ring
// and HD state both in use after 13 tokens); "window" runs beside the same window.
std::shared_ptr<AttentionMethod> method(const std::string& name) {
  if (name == "oal") return make_quadratic_method(oal::test::random_kernels(k_hq, k_d, 3, 11));
  if (name == "oal+window")
    return std::make_shared<WindowedAttention>(
        std::dynamic_pointer_cast<const QuadraticAttention>(method("oal")), Window{2, 5},
        oal::test::randn({k_hq}, 4));
  const Window w = name == "window" ? Window{2, 5} : Window{};
  return make_method(name, {.layer = 0, .q_heads = k_hq, .kv_heads = k_hkv, .head_dim = k_d, .window = w}, 5, nullptr);
}

struct Qkv {
  at::Tensor q, k, v;
};
Qkv tokens(int64_t t, uint64_t seed, at::ScalarType dtype) {
  return {oal::test::randn({1, k_hq, t, k_d}, seed, 0.5).to(dtype),
          oal::test::randn({1, k_hkv, t, k_d}, seed + 1, 0.5).to(dtype),
          oal::test::randn({1, k_hkv, t, k_d}, seed + 2, 1.0).to(dtype)};
}

class Snapshot : public ::testing::TestWithParam<std::tuple<std::string, at::ScalarType>> {};

}  // namespace

TEST_P(Snapshot, RestoredStateContinuesIdentically) {
  const auto [name, dtype] = GetParam();
  auto m = method(name);
  auto original = m->new_state(1);
  const Qkv a = tokens(13, 3, dtype), b = tokens(5, 9, dtype), c = tokens(1, 21, dtype);
  original->extend(a.q, a.k, a.v);
  const StateSnapshot snap = original->snapshot();
  EXPECT_EQ(snap.tokens, 13);
  ASSERT_FALSE(snap.tensors.empty());
  auto restored = m->new_state(1);
  restored->restore(snap);
  EXPECT_EQ(restored->tokens(), 13);
  EXPECT_EQ(restored->state_bytes(), original->state_bytes());
  // Several tokens at once, then one (the prefill and the fused decode paths).
  for (const Qkv* next : {&b, &c}) {
    const at::Tensor want = original->extend(next->q, next->k, next->v);
    const at::Tensor got = restored->extend(next->q, next->k, next->v);
    EXPECT_TRUE(at::equal(got, want)) << name << ": max diff " << (got - want).abs().max().item<double>();
  }
  // A snapshot is a copy: the original went on, the snapshot still holds 13 tokens.
  auto again = m->new_state(1);
  again->restore(snap);
  EXPECT_EQ(again->tokens(), 13);
}

INSTANTIATE_TEST_SUITE_P(
    EveryMethod, Snapshot,
    ::testing::Combine(::testing::Values("softmax", "oal", "global", "taylorshift", "performer",
                                         "dijiang", "spectraformer", "window", "oal+window"),
                       ::testing::Values(at::kFloat, at::kDouble)),
    [](const auto& info) {
      std::string name = std::get<0>(info.param);
      std::replace(name.begin(), name.end(), '+', '_');
      return name + (std::get<1>(info.param) == at::kFloat ? "_f32" : "_f64");
    });

TEST(Snapshot, EveryRegisteredMethodIsCovered) {
  for (const auto& spec : method_registry())
    EXPECT_NO_THROW(method(spec.name)->new_state(1)->snapshot()) << spec.name;
  EXPECT_EQ(method_registry().size(), 8u) << "a new method: add it to the EveryMethod list above";
}

TEST(Snapshot, EmptyStateRoundTrips) {
  for (const auto& spec : method_registry()) {
    auto m = method(spec.name);
    const StateSnapshot snap = m->new_state(1)->snapshot();
    EXPECT_EQ(snap.tokens, 0);
    EXPECT_TRUE(snap.tensors.empty());
    auto s = m->new_state(1);
    s->restore(snap);
    EXPECT_EQ(s->tokens(), 0) << spec.name;
  }
}

TEST(Snapshot, WhatDoesNotFitIsRefused) {
  const Qkv a = tokens(4, 3, at::kFloat);
  for (const auto& spec : method_registry()) {
    auto m = method(spec.name);
    auto full = m->new_state(1);
    full->extend(a.q, a.k, a.v);
    const StateSnapshot good = full->snapshot();
    // Into a state that already holds tokens.
    EXPECT_THROW(full->restore(good), oal::Error) << spec.name;
    // An unknown tensor name.
    StateSnapshot extra = good;
    extra.add("bogus", at::zeros({1}));
    EXPECT_THROW(m->new_state(1)->restore(extra), oal::Error) << spec.name;
    // A tensor with a dimension missing.
    StateSnapshot flat = good;
    flat.tensors[0].second = flat.tensors[0].second.flatten();
    EXPECT_THROW(m->new_state(1)->restore(flat), oal::Error) << spec.name;
    // Tokens claimed without any tensor.
    EXPECT_THROW(m->new_state(1)->restore(StateSnapshot{.tokens = 4}), oal::Error) << spec.name;
    // A snapshot of another batch size.
    auto two = m->new_state(2);
    const Qkv b2{at::cat({a.q, a.q}), at::cat({a.k, a.k}), at::cat({a.v, a.v})};
    two->extend(b2.q, b2.k, b2.v);
    EXPECT_THROW(m->new_state(1)->restore(two->snapshot()), oal::Error) << spec.name;
  }
}
