// Windowed attention (attention/windowed/): the linear-time forward and the decode state
// against the O(T²) fp64 reference, the boundary cases that reduce to known methods,
// stability at large scores, gradients, and snapshots.
#include <gtest/gtest.h>

#include <c10/core/GradMode.h>

#include <cmath>
#include <string>
#include <vector>

#include "oal/attention/oal/references.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/softmax/softmax.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/attention/windowed/window_mass.h"
#include "oal/attention/windowed/windowed_reference.h"
#include "oal/core/error.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

std::shared_ptr<const QuadraticAttention> quadratic(int64_t hq, int64_t d, int64_t chunk,
                                                    uint64_t seed, bool trainable = false) {
  return std::make_shared<QuadraticAttention>(QuadraticAttention::from_kernels(
      oal::test::random_kernels(hq, d, 3, seed), {.chunk = chunk}, trainable));
}

at::Tensor scales(int64_t hq, uint64_t seed) { return randn({hq}, seed, 1.0); }

// The reference for a windowed method: kappa from the factored pairwise weights.
at::Tensor reference(const WindowedAttention& m, const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v) {
  at::Tensor kappa;
  if (m.quadratic())
    kappa = hd_pair_weights(q.to(at::kDouble), k.to(at::kDouble), m.quadratic()->kernels());
  return windowed_pairwise(q, k, v, kappa, m.log_scale(), m.window());
}

struct Shape {
  int64_t batch, hq, hkv, T, d, chunk;
};

// Shapes of DESIGN.md §4 (d 8/16/64, GQA 1/2/7, T around the chunk and the window) and
// windows whose edges fall inside, on and across chunk boundaries; S + W >= T included.
const std::vector<Shape> k_shapes = {{1, 2, 2, 1, 8, 8},   {2, 4, 2, 2, 8, 4},
                                     {1, 7, 1, 37, 16, 8}, {1, 2, 1, 65, 8, 16},
                                     {2, 2, 2, 130, 64, 64}};
const std::vector<Window> k_windows = {{0, 1}, {4, 0}, {1, 3}, {4, 16}, {2, 20}, {4, 64}, {0, 200}};

// fp64 runs the ATen path, so only rounding separates it from the reference (1e-10);
// fp32 runs the SIMD prefill kernel, whose fp32 state readout and exact sums carry
// ~1e-6 relative rounding per term over up to 130 terms (2e-4 bounds it with margin).
TEST(WindowedAttention, ForwardMatchesPairwiseReference) {
  for (const Shape& sh : k_shapes)
    for (const Window& w : k_windows)
      for (bool with_base : {true, false}) {
        if (!with_base && w.recent == 0) continue;
        auto base = with_base ? quadratic(sh.hq, sh.d, sh.chunk, 7) : nullptr;
        WindowedAttention m(base, w, scales(sh.hq, 3));
        auto q = randn({sh.batch, sh.hq, sh.T, sh.d}, 11), k = randn({sh.batch, sh.hkv, sh.T, sh.d}, 12),
             v = randn({sh.batch, sh.hkv, sh.T, sh.d}, 13);
        c10::NoGradGuard g;
        const at::Tensor ref = reference(m, q, k, v);
        EXPECT_LT(rel_err(m.forward(q, k, v), ref), 1e-10)
            << "fp64 T=" << sh.T << " d=" << sh.d << " " << w.describe() << " base " << with_base;
        const at::Tensor y32 = m.forward(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat));
        EXPECT_EQ(y32.scalar_type(), at::kFloat);
        EXPECT_LT(rel_err(y32, ref), 2e-4)
            << "fp32 T=" << sh.T << " d=" << sh.d << " " << w.describe() << " base " << with_base;
      }
}

// bf16 in, bf16 out: inputs rounded to 8 bits of mantissa, compared with the reference
// of the same rounded inputs; the bf16 output rounding (2^-8 relative) dominates.
TEST(WindowedAttention, Bf16InputsGiveBf16Outputs) {
  WindowedAttention m(quadratic(4, 16, 16, 5), {4, 16}, scales(4, 2));
  auto q = randn({1, 4, 70, 16}, 1).to(at::kBFloat16), k = randn({1, 2, 70, 16}, 2).to(at::kBFloat16),
       v = randn({1, 2, 70, 16}, 3).to(at::kBFloat16);
  c10::NoGradGuard g;
  at::Tensor y = m.forward(q, k, v);
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  EXPECT_LT(rel_err(y, reference(m, q, k, v)), 1e-2);
}

TEST(WindowedAttention, NoWindowIsThePlainMethod) {
  auto base = quadratic(4, 8, 8, 9);
  WindowedAttention m(base, {0, 0}, scales(4, 1));
  auto q = randn({2, 4, 45, 8}, 1), k = randn({2, 2, 45, 8}, 2), v = randn({2, 2, 45, 8}, 3);
  c10::NoGradGuard g;
  // Same sums divided once, in another order: rounding only.
  EXPECT_LT(rel_err(m.forward(q, k, v), base->forward(q, k, v)), 1e-12);
}

TEST(WindowedAttention, WindowCoveringTheSequenceIsSoftmax) {
  auto q = randn({1, 4, 40, 8}, 1), k = randn({1, 2, 40, 8}, 2), v = randn({1, 2, 40, 8}, 3);
  const at::Tensor soft = softmax_attention_naive(q, k, v);
  c10::NoGradGuard g;
  for (Window w : {Window{0, 40}, Window{4, 36}, Window{40, 0}, Window{30, 30}}) {
    // The kernel part is empty for every query, whatever c_h: exactly softmax.
    WindowedAttention m(quadratic(4, 8, 8, 9), w, scales(4, 5));
    EXPECT_LT(rel_err(m.forward(q, k, v), soft), 1e-12) << w.describe();
  }
}

// Tokens one at a time and in uneven pieces continue exactly like one forward: the
// ring hands its oldest row to the HD state at the same step the reference moves it
// from E to R.
TEST(WindowedDecodeState, StepsAndPiecesMatchForward) {
  for (bool with_base : {true, false})
    for (auto dtype : {at::kDouble, at::kFloat}) {
      WindowedAttention m(with_base ? quadratic(4, 8, 8, 3) : nullptr, {3, 5}, scales(4, 4));
      auto q = randn({2, 4, 33, 8}, 1, 1.0, dtype), k = randn({2, 2, 33, 8}, 2, 1.0, dtype),
           v = randn({2, 2, 33, 8}, 3, 1.0, dtype);
      c10::NoGradGuard g;
      const at::Tensor whole = m.forward(q, k, v);
      auto st = m.new_state(2);
      std::vector<at::Tensor> ys;
      for (int64_t t = 0; t < 33; ++t)
        ys.push_back(st->step(q.select(2, t), k.select(2, t), v.select(2, t)).unsqueeze(2));
      // fp32: the one-token and the chunked kernel round differently (1e-5).
      const double tol = dtype == at::kDouble ? 1e-11 : 1e-5;
      EXPECT_LT(rel_err(at::cat(ys, 2), whole), tol) << "steps, base " << with_base;
      auto st2 = m.new_state(2);
      std::vector<at::Tensor> parts;
      for (auto [a, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 7}, {9, 1}, {10, 23}})
        parts.push_back(st2->extend(q.narrow(2, a, n), k.narrow(2, a, n), v.narrow(2, a, n)));
      EXPECT_LT(rel_err(at::cat(parts, 2), whole), tol) << "pieces, base " << with_base;
      EXPECT_EQ(st2->tokens(), 33);
    }
}

// The one-token CPU step (simd/window_exact.h with the fused OAL decode step), taken
// once the window is full for fp32 inputs without autograd, against the fp64 reference
// over the shape sweep: fp32 state readout and exact sums (as the fp32 forward, 2e-4).
TEST(WindowedDecodeState, CpuStepMatchesReferenceAcrossShapes) {
  for (const Shape& sh : k_shapes)
    for (const Window& w : {Window{0, 1}, Window{4, 8}, Window{1, 20}})
      for (bool with_base : {true, false}) {
        if (sh.T < w.sinks + w.recent + 2) continue;  // a few steps past a full window
        WindowedAttention m(with_base ? quadratic(sh.hq, sh.d, sh.chunk, 7) : nullptr, w, scales(sh.hq, 3));
        auto q = randn({sh.batch, sh.hq, sh.T, sh.d}, 11), k = randn({sh.batch, sh.hkv, sh.T, sh.d}, 12),
             v = randn({sh.batch, sh.hkv, sh.T, sh.d}, 13);
        c10::NoGradGuard g;
        const at::Tensor ref = reference(m, q, k, v);
        auto st = m.new_state(sh.batch);
        const int64_t t0 = w.sinks + w.recent;  // prefill up to a full window, then steps
        std::vector<at::Tensor> ys{st->extend(q.narrow(2, 0, t0).to(at::kFloat),
                                              k.narrow(2, 0, t0).to(at::kFloat),
                                              v.narrow(2, 0, t0).to(at::kFloat))};
        for (int64_t t = t0; t < sh.T; ++t)
          ys.push_back(st->step(q.select(2, t).to(at::kFloat), k.select(2, t).to(at::kFloat),
                                v.select(2, t).to(at::kFloat)).unsqueeze(2));
        EXPECT_LT(rel_err(at::cat(ys, 2), ref), 2e-4)
            << "T=" << sh.T << " d=" << sh.d << " Hq/Hkv=" << sh.hq << "/" << sh.hkv << " "
            << w.describe() << " base " << with_base;
      }
}

// The CPU steps keep the ring circular (the oldest row overwritten in place): after steps
// that leave it rotated, a snapshot, a restored copy and a multi-token piece (the ATen
// path, which needs position order) must all continue as the whole-sequence forward
// does. fp32 steps and pieces against the fp32 forward: 1e-5 as in StepsAndPiecesMatchForward.
TEST(WindowedDecodeState, RotatedRingContinuesThroughPiecesAndSnapshots) {
  for (bool with_base : {true, false}) {
    WindowedAttention m(with_base ? quadratic(6, 16, 8, 5) : nullptr, {2, 7}, scales(6, 6));
    auto q = randn({1, 6, 40, 16}, 21, 1.0, at::kFloat),
         k = randn({1, 2, 40, 16}, 22, 1.0, at::kFloat),
         v = randn({1, 2, 40, 16}, 23, 1.0, at::kFloat);
    c10::NoGradGuard g;
    const at::Tensor whole = m.forward(q, k, v);
    auto a = m.new_state(1);
    std::vector<at::Tensor> ys{a->extend(q.narrow(2, 0, 9), k.narrow(2, 0, 9), v.narrow(2, 0, 9))};
    for (int64_t t = 9; t < 21; ++t)  // 12 CPU steps: the 7-row ring rotated by 5
      ys.push_back(a->step(q.select(2, t), k.select(2, t), v.select(2, t)).unsqueeze(2));
    const StateSnapshot snap = a->snapshot();
    auto b = m.new_state(1);
    b->restore(snap);
    ys.push_back(a->extend(q.narrow(2, 21, 6), k.narrow(2, 21, 6), v.narrow(2, 21, 6)));
    for (int64_t t = 27; t < 40; ++t)
      ys.push_back(a->step(q.select(2, t), k.select(2, t), v.select(2, t)).unsqueeze(2));
    EXPECT_LT(rel_err(at::cat(ys, 2), whole), 1e-5) << "base " << with_base;
    std::vector<at::Tensor> yb;
    for (int64_t t = 21; t < 40; ++t)
      yb.push_back(b->step(q.select(2, t), k.select(2, t), v.select(2, t)).unsqueeze(2));
    EXPECT_LT(rel_err(at::cat(yb, 2), whole.narrow(2, 21, 19)), 1e-5)
        << "restored, base " << with_base;
  }
}

TEST(WindowedDecodeState, StateBytesDoNotGrowWithPosition) {
  WindowedAttention m(quadratic(2, 8, 8, 3), {4, 16}, scales(2, 4));
  auto st = m.new_state(1);
  c10::NoGradGuard g;
  int64_t bytes_at_64 = 0;
  for (int64_t t = 0; t < 300; ++t) {
    st->step(randn({1, 2, 8}, 10 + t, 1.0, at::kFloat), randn({1, 1, 8}, 500 + t, 1.0, at::kFloat),
             randn({1, 1, 8}, 900 + t, 1.0, at::kFloat));
    if (t == 63) bytes_at_64 = st->state_bytes();
  }
  EXPECT_GT(bytes_at_64, 0);
  EXPECT_EQ(st->state_bytes(), bytes_at_64);
}

// Scores of 1e4 (q, k of norm ~300 in d = 8): exp overflows unless the running maximum
// shifts both parts together. The linear part is kept to fp64 (the expanded readout of
// κ ~ 1e8 cancels in fp32); the windowed-only method runs in fp32 too.
TEST(WindowedAttention, HugeScoresStayFinite) {
  auto q = randn({1, 2, 50, 8}, 1, 100.0), k = randn({1, 1, 50, 8}, 2, 100.0), v = randn({1, 1, 50, 8}, 3);
  EXPECT_GT(at::matmul(q, k.transpose(-1, -2)).abs().max().item<double>() / std::sqrt(8.0), 1e4);
  c10::NoGradGuard g;
  WindowedAttention oal_w(quadratic(2, 8, 8, 3), {2, 8}, scales(2, 1));
  at::Tensor y = oal_w.forward(q, k, v);
  EXPECT_TRUE(at::isfinite(y).all().item<bool>());
  EXPECT_LT(rel_err(y, reference(oal_w, q, k, v)), 1e-9);
  WindowedAttention only(nullptr, {2, 8}, scales(2, 1));
  at::Tensor y32 = only.forward(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat));
  EXPECT_TRUE(at::isfinite(y32).all().item<bool>());
  EXPECT_LT(rel_err(y32, reference(only, q, k, v)), 1e-5);
}

// Gradients of the chunked form (ATen path, fp64) against autograd of the reference
// for q, k, v, L and c_h: the same function, so only rounding separates them.
TEST(WindowedAttention, GradientsMatchTheReference) {
  auto base = quadratic(4, 8, 8, 3, /*trainable=*/true);
  WindowedAttention m(base, {2, 6}, scales(4, 4), /*trainable=*/true);
  ASSERT_EQ(m.parameters().size(), 2u);
  auto make = [](at::Tensor t) { return t.set_requires_grad(true); };
  auto q = make(randn({1, 4, 29, 8}, 1)), k = make(randn({1, 2, 29, 8}, 2)), v = make(randn({1, 2, 29, 8}, 3));
  auto w_out = randn({1, 4, 29, 8}, 4);
  (m.forward(q, k, v) * w_out).sum().backward();
  std::vector<at::Tensor> fast;
  for (const at::Tensor& t : {q, k, v, m.parameters()[0], m.parameters()[1]}) {
    fast.push_back(t.grad().clone());
    t.mutable_grad().zero_();
  }
  // The reference's kappa from the same L, differentiably (hd_pair_weights reads
  // detached kernels).
  const at::Tensor kappa = oal::test::kappa_from(q, k, base->kernels());
  (windowed_pairwise(q, k, v, kappa, m.log_scale(), m.window()) * w_out).sum().backward();
  std::vector<at::Tensor> ref{q.grad(), k.grad(), v.grad(), m.parameters()[0].grad(),
                              m.parameters()[1].grad()};
  const char* names[] = {"q", "k", "v", "L", "c"};
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_TRUE(ref[i].defined() && fast[i].defined()) << names[i];
    EXPECT_LT(rel_err(fast[i], ref[i]), 1e-9) << names[i];
  }
}

TEST(WindowedDecodeState, SnapshotRoundTripAndRefusals) {
  WindowedAttention m(quadratic(4, 8, 8, 3), {3, 5}, scales(4, 4));
  auto q = randn({1, 4, 20, 8}, 1, 1.0, at::kFloat), k = randn({1, 2, 20, 8}, 2, 1.0, at::kFloat),
       v = randn({1, 2, 20, 8}, 3, 1.0, at::kFloat);
  c10::NoGradGuard g;
  auto a = m.new_state(1);
  a->extend(q.narrow(2, 0, 12), k.narrow(2, 0, 12), v.narrow(2, 0, 12));
  const StateSnapshot snap = a->snapshot();
  auto b = m.new_state(1);
  b->restore(snap);
  EXPECT_EQ(b->tokens(), 12);
  EXPECT_EQ(b->state_bytes(), a->state_bytes());
  const at::Tensor ya = a->extend(q.narrow(2, 12, 8), k.narrow(2, 12, 8), v.narrow(2, 12, 8));
  const at::Tensor yb = b->extend(q.narrow(2, 12, 8), k.narrow(2, 12, 8), v.narrow(2, 12, 8));
  EXPECT_TRUE(at::equal(ya, yb));

  auto broken = [&](auto edit) {
    StateSnapshot s = snap;
    for (auto& t : s.tensors) t.second = t.second.clone();
    edit(s);
    return s;
  };
  oal::test::expect_error([&] { m.new_state(1)->restore(broken([](StateSnapshot& s) { s.tokens = 7; })); },
                          {"[windowed_decode]", "ring"});
  oal::test::expect_error(
      [&] {
        m.new_state(1)->restore(broken([](StateSnapshot& s) {
          for (auto& t : s.tensors)
            if (t.first == "ring_v") t.second[0][0][0][0] = std::nanf("");
        }));
      },
      {"[windowed_decode]", "not finite"});
  oal::test::expect_error(
      [&] {
        m.new_state(1)->restore(broken([](StateSnapshot& s) {
          std::erase_if(s.tensors, [](auto& t) { return t.first == "S"; });
        }));
      },
      {"[windowed_decode]", "linear state"});
  oal::test::expect_error([&] { a->restore(snap); }, {"[windowed_decode]"});
}

TEST(WindowedAttention, RefusesImpossibleWindowsAndShapes) {
  oal::test::expect_error([] { WindowedAttention(nullptr, {4, 0}, at::zeros({2})); },
                          {"[windowed_attention]", "at least 1 token"});
  oal::test::expect_error([] { WindowedAttention(nullptr, {-1, 4}, at::zeros({2})); },
                          {"[windowed_attention]", "sinks"});
  oal::test::expect_error([] { WindowedAttention(quadratic(4, 8, 8, 1), {4, 4}, at::zeros({3})); },
                          {"[windowed_attention]", "query heads"});
  oal::test::expect_error(
      [] { WindowedAttention(nullptr, {4, 4}, at::full({2}, std::nan(""))); },
      {"[windowed_attention]", "not finite"});
  WindowedAttention m(quadratic(4, 8, 8, 1), {1, 4}, at::zeros({4}));
  oal::test::expect_error(
      [&] { m.forward(randn({1, 3, 5, 8}, 1), randn({1, 1, 5, 8}, 2), randn({1, 1, 5, 8}, 3)); },
      {"[windowed_decode]", "query heads"});
}

// The weight beyond the window, against the softmax weights of the naive reference: all
// of it without a window, none when the window covers the sequence, and in between the
// sum of the weights on R_i averaged over positions (fp64, rounding only).
TEST(WindowMass, MatchesSoftmaxWeightsBeyondTheWindow) {
  auto q = randn({2, 4, 40, 8}, 1), k = randn({2, 2, 40, 8}, 2);
  EXPECT_LT((mass_beyond_window(q, k, {0, 0}) - 1.0).abs().max().item<double>(), 1e-12);
  EXPECT_LT(mass_beyond_window(q, k, {0, 40}).abs().max().item<double>(), 1e-15);
  const Window w{2, 5};
  const at::Tensor kr = k.repeat_interleave(2, 1);
  at::Tensor s = at::matmul(q, kr.transpose(-1, -2)) / std::sqrt(8.0);
  const at::Tensor pos = at::arange(40, at::kLong);
  s = s.masked_fill((pos.unsqueeze(0) <= pos.unsqueeze(1)).logical_not(), -INFINITY);
  const at::Tensor want = (at::softmax(s, -1) * linear_mask(pos, pos, w).to(at::kDouble)).sum(-1).mean(at::IntArrayRef{0, 2});
  EXPECT_LT((mass_beyond_window(q, k, w) - want).abs().max().item<double>(), 1e-12);
  oal::test::expect_error([&] { mass_beyond_window(q, k.narrow(2, 0, 30), w); }, {"[mass_beyond_window]"});
}

}  // namespace
}  // namespace oal::attn
