// Retrieval heads kept exact beside a window (attention/windowed/full_heads.h): the kept
// heads equal softmax, the others the windowed method, in the forward, the decode state
// (steps, pieces, snapshots) and the gradients; and the retrieval mass that chooses them
// (window_mass.h mass_on_keys) against the softmax weights.
#include <gtest/gtest.h>

#include <c10/core/GradMode.h>

#include <cmath>
#include <vector>

#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/oal/references.h"
#include "oal/attention/softmax/softmax.h"
#include "oal/attention/windowed/full_heads.h"
#include "oal/attention/windowed/window_mass.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/attention/windowed/windowed_reference.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

std::shared_ptr<const QuadraticAttention> quadratic(int64_t hq, int64_t d, uint64_t seed,
                                                    bool trainable = false) {
  return std::make_shared<QuadraticAttention>(QuadraticAttention::from_kernels(
      oal::test::random_kernels(hq, d, 3, seed), {.chunk = 8}, trainable));
}

// The formula's reference: the windowed pairwise reference for every head, then the kept
// query heads (GQA group g of KV head h: h·g ... h·g + g - 1) from naive softmax.
at::Tensor reference(const WindowedAttention& m, const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v) {
  at::Tensor kappa;
  if (m.quadratic())
    kappa = hd_pair_weights(q.to(at::kDouble), k.to(at::kDouble), m.quadratic()->kernels());
  at::Tensor y = windowed_pairwise(q, k, v, kappa, m.log_scale(), m.window());
  const int64_t g = q.size(1) / k.size(1);
  const at::Tensor exact =
      softmax_attention_naive(q.to(at::kDouble), k.to(at::kDouble).repeat_interleave(g, 1),
                              v.to(at::kDouble).repeat_interleave(g, 1));
  for (int64_t h : m.full_heads().kv)
    y = y.index_copy(1, at::arange(h * g, (h + 1) * g, at::kLong),
                     exact.narrow(1, h * g, g).to(y.scalar_type()));
  return y;
}

struct Case {
  bool with_base;
  FullHeads kept;
};
// With and without a kernel, one KV head kept of three, and all of them.
const std::vector<Case> k_cases = {{true, {{1}}}, {false, {{0, 2}}}, {true, {{0, 1, 2}}}};

// fp64 runs the ATen paths (rounding only: 1e-10); fp32 the SIMD prefill and flash
// kernels, whose fp32 sums carry ~1e-6 relative rounding per term over 45 terms (2e-4,
// as the windowed forward's test).
TEST(FullHeads, ForwardKeepsHeadsExactAndTheRestWindowed) {
  for (const Case& c : k_cases)
    for (auto dtype : {at::kDouble, at::kFloat}) {
      WindowedAttention m(c.with_base ? quadratic(6, 8, 3) : nullptr, {2, 6},
                          randn({6}, 4, 1.0));
      m.set_full_heads(c.kept);
      auto q = randn({2, 6, 45, 8}, 1, 1.0, dtype), k = randn({2, 3, 45, 8}, 2, 1.0, dtype),
           v = randn({2, 3, 45, 8}, 3, 1.0, dtype);
      c10::NoGradGuard g;
      const at::Tensor y = m.forward(q, k, v);
      const double tol = dtype == at::kDouble ? 1e-10 : 2e-4;
      EXPECT_LT(rel_err(y, reference(m, q, k, v)), tol) << c.kept.describe();
      // The heads not kept are exactly the windowed method's (the same computation).
      WindowedAttention plain(m.base(), m.window(), m.log_scale());
      const at::Tensor yw = plain.forward(q, k, v);
      for (int64_t h = 0; h < 3; ++h)
        if (std::find(c.kept.kv.begin(), c.kept.kv.end(), h) == c.kept.kv.end())
          EXPECT_TRUE(at::equal(y.narrow(1, 2 * h, 2), yw.narrow(1, 2 * h, 2))) << h;
    }
}

// Steps, pieces that cross the window edge, and a snapshot restored mid-way continue as
// the whole forward (fp32: step and chunked kernels round differently, 1e-5).
TEST(FullHeadsDecodeState, StepsPiecesAndSnapshotsMatchForward) {
  for (const Case& c : k_cases)
    for (auto dtype : {at::kDouble, at::kFloat}) {
      WindowedAttention m(c.with_base ? quadratic(6, 8, 5) : nullptr, {2, 5}, randn({6}, 6, 1.0));
      m.set_full_heads(c.kept);
      auto q = randn({1, 6, 30, 8}, 1, 1.0, dtype), k = randn({1, 3, 30, 8}, 2, 1.0, dtype),
           v = randn({1, 3, 30, 8}, 3, 1.0, dtype);
      c10::NoGradGuard g;
      const at::Tensor whole = m.forward(q, k, v);
      const double tol = dtype == at::kDouble ? 1e-11 : 1e-5;
      auto a = m.new_state(1);
      std::vector<at::Tensor> ys;
      for (int64_t t = 0; t < 13; ++t)
        ys.push_back(a->step(q.select(2, t), k.select(2, t), v.select(2, t)).unsqueeze(2));
      auto b = m.new_state(1);
      b->restore(a->snapshot());
      EXPECT_EQ(b->tokens(), 13);
      EXPECT_EQ(b->state_bytes(), a->state_bytes());
      ys.push_back(b->extend(q.narrow(2, 13, 9), k.narrow(2, 13, 9), v.narrow(2, 13, 9)));
      for (int64_t t = 22; t < 30; ++t)
        ys.push_back(b->step(q.select(2, t), k.select(2, t), v.select(2, t)).unsqueeze(2));
      EXPECT_LT(rel_err(at::cat(ys, 2), whole), tol) << c.kept.describe();
    }
}

// Only the kept heads' cache grows: each token adds (D + Dv) fp32 values per kept head.
TEST(FullHeadsDecodeState, OnlyTheKeptHeadsCacheGrows) {
  WindowedAttention m(quadratic(6, 8, 3), {2, 4}, randn({6}, 4, 1.0));
  m.set_full_heads({{1}});
  WindowedAttention plain(m.base(), m.window(), m.log_scale());
  auto q = randn({1, 6, 40, 8}, 1, 1.0, at::kFloat), k = randn({1, 3, 40, 8}, 2, 1.0, at::kFloat),
       v = randn({1, 3, 40, 8}, 3, 1.0, at::kFloat);
  c10::NoGradGuard g;
  auto a = m.new_state(1), b = plain.new_state(1);
  for (int64_t n : {20, 20}) {
    const int64_t p0 = a->tokens();
    a->absorb(q.narrow(2, p0, n), k.narrow(2, p0, n), v.narrow(2, p0, n));
    b->absorb(q.narrow(2, p0, n), k.narrow(2, p0, n), v.narrow(2, p0, n));
    EXPECT_EQ(a->state_bytes() - b->state_bytes(), a->tokens() * (8 + 8) * 4);
  }
}

// Gradients of q, k, v, L and c_h against autograd of the fp64 reference (rounding only).
TEST(FullHeads, GradientsMatchTheReference) {
  auto base = quadratic(4, 8, 3, /*trainable=*/true);
  WindowedAttention m(base, {2, 6}, randn({4}, 4, 1.0), /*trainable=*/true);
  m.set_full_heads({{1}});
  auto make = [](at::Tensor t) { return t.set_requires_grad(true); };
  auto q = make(randn({1, 4, 29, 8}, 1)), k = make(randn({1, 2, 29, 8}, 2)),
       v = make(randn({1, 2, 29, 8}, 3));
  const at::Tensor w_out = randn({1, 4, 29, 8}, 4);
  (m.forward(q, k, v) * w_out).sum().backward();
  std::vector<at::Tensor> fast;
  for (const at::Tensor& t : {q, k, v, m.parameters()[1]}) {
    fast.push_back(t.grad().clone());
    t.mutable_grad().zero_();
  }
  // The kernel part of the reference reads L detached (hd_pair_weights), so L's own
  // gradient is left to the windowed tests; c_h's reaches the reference through
  // windowed_pairwise. The kept heads take none of either.
  (reference(m, q, k, v) * w_out).sum().backward();
  const std::vector<at::Tensor> ref{q.grad(), k.grad(), v.grad(), m.parameters()[1].grad()};
  const char* names[] = {"q", "k", "v", "c"};
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_TRUE(ref[i].defined() && fast[i].defined()) << names[i];
    EXPECT_LT(rel_err(fast[i], ref[i]), 1e-9) << names[i];
  }
  EXPECT_EQ(fast[3].narrow(0, 2, 2).abs().max().item<double>(), 0.0) << "kept heads' c_h";
}

TEST(FullHeads, RefusalsAreNamedErrors) {
  WindowedAttention m(nullptr, {2, 4}, at::zeros({1}));
  oal::test::expect_error([&] { m.set_full_heads({{1, 1}}); }, {"[windowed_attention]", "ascending"});
  oal::test::expect_error([&] { m.set_full_heads({{-1}}); }, {"[windowed_attention]", "does not exist"});
  m.set_full_heads({{3}});
  auto q = randn({1, 4, 5, 8}, 1), k = randn({1, 2, 5, 8}, 2), v = randn({1, 2, 5, 8}, 3);
  oal::test::expect_error([&] { m.forward(q, k, v); }, {"[full_heads]", "2 KV heads"});
  oal::test::expect_error([&] { m.new_state(1)->extend(q, k, v); }, {"[full_heads]"});

  // A snapshot without the kept heads' cache, or with a cache of another length, is
  // refused and leaves the state empty.
  m.set_full_heads({{1}});
  auto a = m.new_state(1);
  {
    c10::NoGradGuard g;
    a->extend(q, k, v);
  }
  StateSnapshot snap = a->snapshot(), no_cache = snap, short_cache = snap;
  std::erase_if(no_cache.tensors, [](auto& t) { return t.first.rfind("full_", 0) == 0; });
  for (auto& t : short_cache.tensors)
    if (t.first.rfind("full_", 0) == 0) t.second = t.second.narrow(2, 0, 3).contiguous();
  auto b = m.new_state(1);
  oal::test::expect_error([&] { b->restore(no_cache); }, {"[full_heads_state]", "full_k"});
  oal::test::expect_error([&] { b->restore(short_cache); }, {"[softmax_kv_cache]"});
  EXPECT_EQ(b->tokens(), 0);
  StateSnapshot bad_ring = snap;
  for (auto& t : bad_ring.tensors)
    if (t.first == "ring_k") t.second = t.second.narrow(2, 0, 1).contiguous();
  oal::test::expect_error([&] { b->restore(bad_ring); }, {"[windowed_decode]"});
  EXPECT_EQ(b->tokens(), 0);
  EXPECT_EQ(b->state_bytes(), m.new_state(1)->state_bytes());
  b->restore(snap);  // still usable after the refusals
  EXPECT_EQ(b->tokens(), 5);
}

// mass_on_keys against the softmax weights of the naive scores: the chosen rows' weight
// on the chosen keys outside the window (fp64, rounding only).
TEST(WindowMass, MassOnKeysMatchesSoftmaxWeights) {
  auto q = randn({4, 40, 8}, 1), k = randn({2, 40, 8}, 2);
  const Window w{2, 5};
  const at::Tensor rows = at::tensor(std::vector<int64_t>{10, 25, 39}, at::kLong);
  at::Tensor keys = at::zeros({40}, at::kBool);
  for (int64_t j : {0, 3, 7, 20, 22, 38}) keys[j] = true;
  at::Tensor s = at::matmul(q, k.repeat_interleave(2, 0).transpose(-1, -2)) / std::sqrt(8.0);
  const at::Tensor pos = at::arange(40, at::kLong);
  s = s.masked_fill((pos.unsqueeze(0) <= pos.unsqueeze(1)).logical_not(), -INFINITY);
  const at::Tensor p = at::softmax(s, -1).index_select(1, rows);  // [4, 3, 40]
  at::Tensor want = at::zeros({4}, at::kDouble);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j : {0, 3, 7, 20, 22, 38}) {
      const int64_t i = rows[r].item<int64_t>();
      if (j <= i && !w.exact(i, j)) want += p.select(1, r).select(1, j) / 3.0;
    }
  EXPECT_LT((mass_on_keys(q, k, rows, keys, w) - want).abs().max().item<double>(), 1e-12);
  EXPECT_LT(mass_on_keys(q, k, rows, keys, {0, 40}).abs().max().item<double>(), 1e-15);
  oal::test::expect_error([&] { mass_on_keys(q, k, rows + 10, keys, w); }, {"[mass_on_keys]", "rows"});
  oal::test::expect_error([&] { mass_on_keys(q, k, rows, keys.narrow(0, 0, 30), w); },
                          {"[mass_on_keys]", "keys"});
  oal::test::expect_error([&] { mass_on_keys(q, k.narrow(1, 0, 30), rows, keys, w); },
                          {"[mass_on_keys]"});
}

}  // namespace
}  // namespace oal::attn
