// Windowed feature-map baselines (attention/windowed/ over attention/baselines/): the
// linear-time forward and the decode state against the O(T²) fp64 reference with
// κ = φ(q)·φ(k) built here from the baseline's features, the boundary cases, Performer's
// key shift across decode calls, gradients, snapshots, and the store round trip.
#include <gtest/gtest.h>

#include <c10/core/GradMode.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "oal/attention/baselines/feature_linear.h"
#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/method_names.h"
#include "oal/attention/method_store.h"
#include "oal/attention/registry.h"
#include "oal/attention/softmax/softmax.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/attention/windowed/windowed_reference.h"
#include "oal/core/error.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

const std::vector<std::string> k_baselines = {names::taylorshift, names::performer,
                                              names::dijiang, names::spectraformer};

// A baseline beside `w` through the registry (the path calibrate and convert take), c_h
// set to `c` (per head).
std::shared_ptr<WindowedAttention> windowed(const std::string& name, int64_t hq, int64_t hkv,
                                            int64_t d, const Window& w, const at::Tensor& c) {
  // (Without a window the registry gives the plain method: wrapped here.)
  auto made = make_method(name, MethodShape{3, hq, hkv, d, w}, 17, nullptr);
  auto m = w.none() ? std::make_shared<WindowedAttention>(made, w, c)
                    : std::dynamic_pointer_cast<WindowedAttention>(made);
  EXPECT_NE(m, nullptr) << name;
  EXPECT_NE(m->feature_map(), nullptr) << name;
  m->load_log_scale(c);
  return m;
}

// κ for every (query, key) pair from the baseline's features in fp64, written out here:
// φ(q)·φ(k), the key shift (Performer's) added back.
at::Tensor reference_kappa(const FeatureMapMethod& fm, const at::Tensor& q, const at::Tensor& k) {
  const FeatureMaps f = fm.features(q.to(at::kDouble), k.to(at::kDouble));
  at::Tensor fk = expand_kv_heads(f.k.to(at::kDouble), q.size(1));
  at::Tensor kappa = at::matmul(f.q.to(at::kDouble), fk.transpose(-1, -2));
  if (f.k_log_shift.defined())
    kappa = kappa * expand_kv_heads(f.k_log_shift.to(at::kDouble).unsqueeze(-1).unsqueeze(-1),
                                    q.size(1)).exp();
  return kappa;
}

at::Tensor reference(const WindowedAttention& m, const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v) {
  return windowed_pairwise(q, k, v, reference_kappa(*m.feature_map(), q, k), m.log_scale(),
                           m.window());
}

struct Shape {
  int64_t batch, hq, hkv, T, d;
};
// GQA 1/2/4, T below, around and past the window; head dims 8 and 16.
const std::vector<Shape> k_shapes = {{1, 2, 2, 1, 8}, {2, 4, 2, 9, 8}, {1, 4, 1, 70, 16},
                                     {2, 2, 1, 131, 8}};
const std::vector<Window> k_windows = {{0, 1}, {4, 0}, {1, 3}, {4, 16}, {2, 64}, {0, 200}};

// fp64: the chunked prefix sums against the pairwise reference, rounding only (1e-9:
// Performer's features are exponentials of projections, relative rounding 1e-15 per term
// over ~250 features and 131 keys). fp32 inputs: features in fp32 for TaylorShift and
// DiJiang (~1e-7 per term over up to 131 keys: 1e-4 bounds it), fp64 for the others.
TEST(WindowedFeatureAttention, ForwardMatchesPairwiseReference) {
  for (const std::string& name : k_baselines)
    for (const Shape& sh : k_shapes)
      for (const Window& w : k_windows) {
        auto m = windowed(name, sh.hq, sh.hkv, sh.d, w, randn({sh.hq}, 3, 1.0));
        auto q = randn({sh.batch, sh.hq, sh.T, sh.d}, 11), k = randn({sh.batch, sh.hkv, sh.T, sh.d}, 12),
             v = randn({sh.batch, sh.hkv, sh.T, sh.d}, 13);
        c10::NoGradGuard g;
        const at::Tensor ref = reference(*m, q, k, v);
        EXPECT_LT(rel_err(m->forward(q, k, v), ref), 1e-9)
            << name << " fp64 T=" << sh.T << " " << w.describe();
        const at::Tensor y32 = m->forward(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat));
        EXPECT_EQ(y32.scalar_type(), at::kFloat);
        EXPECT_LT(rel_err(y32, ref), 1e-4) << name << " fp32 T=" << sh.T << " " << w.describe();
      }
}

// S = W = 0 leaves only κ: the plain baseline. S + W >= T leaves only the exact part:
// softmax, whatever c_h.
TEST(WindowedFeatureAttention, BoundaryCasesAreThePlainMethodAndSoftmax) {
  auto q = randn({1, 4, 40, 8}, 1), k = randn({1, 2, 40, 8}, 2), v = randn({1, 2, 40, 8}, 3);
  const at::Tensor soft = softmax_attention_naive(q, k, v);
  c10::NoGradGuard g;
  for (const std::string& name : k_baselines) {
    auto none = windowed(name, 4, 2, 8, {0, 0}, randn({4}, 5, 1.0));
    const auto plain = make_method(name, MethodShape{3, 4, 2, 8, {}}, 17, nullptr);
    // The same sums divided once, in another order: rounding only.
    EXPECT_LT(rel_err(none->forward(q, k, v), plain->forward(q, k, v)), 1e-10) << name;
    for (Window w : {Window{0, 40}, Window{4, 36}, Window{40, 0}})
      EXPECT_LT(rel_err(windowed(name, 4, 2, 8, w, randn({4}, 6, 1.0))->forward(q, k, v), soft),
                1e-12)
          << name << " " << w.describe();
  }
}

// Tokens one at a time and in uneven pieces continue exactly like one forward. For
// Performer every call brings a new key shift (the max over its own keys), which the
// state must align with the absorbed prefix and the combination must add back.
TEST(WindowedFeatureDecodeState, StepsAndPiecesMatchForward) {
  for (const std::string& name : k_baselines) {
    auto m = windowed(name, 4, 2, 8, {3, 5}, randn({4}, 4, 1.0));
    // Later tokens larger than earlier ones: Performer's key shift grows between calls.
    auto q = randn({2, 4, 33, 8}, 1), v = randn({2, 2, 33, 8}, 3);
    auto k = randn({2, 2, 33, 8}, 2) * at::linspace(0.5, 2.0, 33, at::kDouble).view({1, 1, 33, 1});
    c10::NoGradGuard g;
    const at::Tensor whole = m->forward(q, k, v);
    EXPECT_LT(rel_err(whole, reference(*m, q, k, v)), 1e-9) << name;
    auto st = m->new_state(2);
    std::vector<at::Tensor> ys;
    for (int64_t t = 0; t < 33; ++t)
      ys.push_back(st->step(q.select(2, t), k.select(2, t), v.select(2, t)).unsqueeze(2));
    EXPECT_LT(rel_err(at::cat(ys, 2), whole), 1e-10) << name << " steps";
    auto st2 = m->new_state(2);
    std::vector<at::Tensor> parts;
    for (auto [a, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 7}, {9, 1}, {10, 23}})
      parts.push_back(st2->extend(q.narrow(2, a, n), k.narrow(2, a, n), v.narrow(2, a, n)));
    EXPECT_LT(rel_err(at::cat(parts, 2), whole), 1e-10) << name << " pieces";
    EXPECT_EQ(st2->tokens(), 33);
  }
}

TEST(WindowedFeatureDecodeState, StateBytesDoNotGrowWithPosition) {
  for (const std::string& name : k_baselines) {
    auto m = windowed(name, 2, 1, 8, {4, 16}, randn({2}, 4, 1.0));
    auto st = m->new_state(1);
    c10::NoGradGuard g;
    int64_t bytes_at_64 = 0;
    for (int64_t t = 0; t < 200; ++t) {
      st->step(randn({1, 2, 8}, 10 + t, 1.0, at::kFloat), randn({1, 1, 8}, 500 + t, 1.0, at::kFloat),
               randn({1, 1, 8}, 900 + t, 1.0, at::kFloat));
      if (t == 63) bytes_at_64 = st->state_bytes();
    }
    EXPECT_GT(bytes_at_64, 0) << name;
    EXPECT_EQ(st->state_bytes(), bytes_at_64) << name;
  }
}

// Gradients of the chunked form (fp64, ATen) against autograd of the reference for q, k,
// v, the baseline's own parameters and c_h: the same function, rounding only. (Performer
// has no parameters of its own.)
TEST(WindowedFeatureAttention, GradientsMatchTheReference) {
  for (const std::string& name : {std::string(names::taylorshift), std::string(names::dijiang),
                                  std::string(names::performer)}) {
    auto fixed = windowed(name, 4, 2, 8, {2, 6}, randn({4}, 4, 1.0));
    auto base = std::const_pointer_cast<AttentionMethod>(fixed->base());
    for (auto p : base->parameters()) p.set_requires_grad(true);
    WindowedAttention m(base, fixed->window(), fixed->log_scale(), /*trainable=*/true);
    auto make = [](at::Tensor t) { return t.set_requires_grad(true); };
    auto q = make(randn({1, 4, 29, 8}, 1)), k = make(randn({1, 2, 29, 8}, 2)),
         v = make(randn({1, 2, 29, 8}, 3));
    auto w_out = randn({1, 4, 29, 8}, 4);
    std::vector<at::Tensor> leaves{q, k, v};
    for (const auto& p : m.parameters()) leaves.push_back(p);
    (m.forward(q, k, v) * w_out).sum().backward();
    std::vector<at::Tensor> fast;
    for (at::Tensor& t : leaves) {
      fast.push_back(t.grad().clone());
      t.mutable_grad().zero_();
    }
    (windowed_pairwise(q, k, v, reference_kappa(*m.feature_map(), q, k), m.log_scale(), m.window()) *
     w_out).sum().backward();
    for (size_t i = 0; i < leaves.size(); ++i) {
      ASSERT_TRUE(leaves[i].grad().defined()) << name << " leaf " << i;
      EXPECT_LT(rel_err(fast[i], leaves[i].grad()), 1e-8) << name << " leaf " << i;
    }
  }
}

TEST(WindowedFeatureDecodeState, SnapshotRoundTripAndRefusals) {
  for (const std::string& name : k_baselines) {
    auto m = windowed(name, 4, 2, 8, {3, 5}, randn({4}, 4, 1.0));
    auto q = randn({1, 4, 20, 8}, 1, 1.0, at::kFloat), k = randn({1, 2, 20, 8}, 2, 1.0, at::kFloat),
         v = randn({1, 2, 20, 8}, 3, 1.0, at::kFloat);
    c10::NoGradGuard g;
    auto a = m->new_state(1);
    a->extend(q.narrow(2, 0, 12), k.narrow(2, 0, 12), v.narrow(2, 0, 12));
    const StateSnapshot snap = a->snapshot();
    for (auto [key, dims] : {std::pair{"S", 4}, {"z", 3}, {"log_shift", 2}, {"ring_phi", 4}})
      EXPECT_NE(snap.find("test", key, dims, false), nullptr) << name << " " << key;
    auto b = m->new_state(1);
    b->restore(snap);
    EXPECT_EQ(b->tokens(), 12);
    EXPECT_EQ(b->state_bytes(), a->state_bytes());
    EXPECT_TRUE(at::equal(a->extend(q.narrow(2, 12, 8), k.narrow(2, 12, 8), v.narrow(2, 12, 8)),
                          b->extend(q.narrow(2, 12, 8), k.narrow(2, 12, 8), v.narrow(2, 12, 8))))
        << name;

    auto broken = [&](const char* key, auto edit) {
      StateSnapshot s = snap;
      for (auto& t : s.tensors) {
        t.second = t.second.clone();
        if (t.first == key) edit(t.second);
      }
      return s;
    };
    auto fresh = m->new_state(1);
    oal::test::expect_error(
        [&] { fresh->restore(broken("z", [](at::Tensor& t) { t = t.narrow(2, 0, 1).clone(); })); },
        {"[windowed_decode]", "z ["});
    oal::test::expect_error(
        [&] { fresh->restore(broken("ring_phi", [](at::Tensor& t) { t = t.narrow(2, 0, 2).clone(); })); },
        {"[windowed_decode]", "ring_phi"});
    oal::test::expect_error(
        [&] { fresh->restore(broken("ring_phi", [](at::Tensor& t) { t.view(-1)[0] = INFINITY; })); },
        {"[windowed_decode]", "not finite"});
    if (name == names::performer) {  // its key shift is part of the state
      StateSnapshot s = snap;
      std::erase_if(s.tensors, [](auto& t) { return t.first == "log_shift"; });
      oal::test::expect_error([&] { fresh->restore(s); }, {"[windowed_decode]", "log_shift"});
    }
    oal::test::expect_error(
        [&] { fresh->restore(broken("S", [](at::Tensor& t) { t.view(-1)[0] = std::nan(""); })); },
        {"[windowed_decode]", "not finite"});
    // A failed restore leaves the state as it was: empty, and usable.
    EXPECT_EQ(fresh->tokens(), 0);
    EXPECT_EQ(fresh->state_bytes(), 0);
  }
}

// A calibration store holds a windowed baseline's parameters and c_h; read back, it
// computes the same outputs.
TEST(WindowedFeatureAttention, StoreRoundTrip) {
  const Window w{2, 6};
  MethodStore store;
  store.methods = {names::performer, names::taylorshift};
  store.window = w;
  store.seed = 17;
  LayerMethods lm{3, {}};
  lm.methods[names::performer] = windowed(names::performer, 4, 2, 8, w, randn({4}, 1, 1.0));
  lm.methods[names::taylorshift] = windowed(names::taylorshift, 4, 2, 8, w, randn({4}, 2, 1.0));
  store.layers.push_back(lm);
  const auto dir = std::filesystem::temp_directory_path() / "oal_test_windowed_feature_store";
  std::filesystem::remove_all(dir);
  write_method_store(dir, store);
  const MethodStore back = read_method_store(dir);
  auto q = randn({1, 4, 30, 8}, 1), k = randn({1, 2, 30, 8}, 2), v = randn({1, 2, 30, 8}, 3);
  c10::NoGradGuard g;
  for (const auto& name : store.methods) {
    const auto& got = back.layers.at(0).methods.at(name);
    ASSERT_NE(dynamic_cast<const WindowedAttention*>(got.get()), nullptr) << name;
    // Parameters and c_h stored as fp32 bytes: ~1e-7 relative in the outputs.
    EXPECT_LT(rel_err(got->forward(q, k, v), lm.methods.at(name)->forward(q, k, v)), 1e-6) << name;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace oal::attn
