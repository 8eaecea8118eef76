// The registry's traits say what the methods do: `stochastic` methods draw their initial
// parameters from the seed (two seeds give two different attentions), the others do not;
// `kind` matches the class a method builds.
#include <gtest/gtest.h>

#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/registry.h"
#include "oal/attention/softmax/softmax_method.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/core/error.h"

namespace attn = oal::attn;

namespace {
// fp64 inputs: the comparison below is between exact equality and a visible difference.
struct Qkv {
  at::Tensor q, k, v;
};
Qkv inputs() {
  at::manual_seed(7);
  const auto o = at::TensorOptions().dtype(at::kDouble);
  return {at::randn({1, 4, 16, 8}, o), at::randn({1, 2, 16, 8}, o), at::randn({1, 2, 16, 8}, o)};
}
bool windowed_only(const attn::MethodSpec& spec) { return spec.kind == attn::MethodKind::window; }
}  // namespace

TEST(MethodRegistry, StochasticMethodsDependOnTheSeedAndOnlyThey) {
  const Qkv x = inputs();
  for (const auto& spec : attn::method_registry()) {
    if (spec.needs_kernels) continue;  // oal is built from fitted kernels, no seed enters
    // The windowed-only method needs a window; the others run without one.
    const attn::MethodShape shape{3, 4, 2, 8, windowed_only(spec) ? attn::Window{2, 4} : attn::Window{}};
    const auto a = attn::make_method(spec.name, shape, 1, nullptr);
    const auto b = attn::make_method(spec.name, shape, 2, nullptr);
    const auto a2 = attn::make_method(spec.name, shape, 1, nullptr);
    const at::Tensor ya = a->forward(x.q, x.k, x.v), yb = b->forward(x.q, x.k, x.v);
    EXPECT_TRUE(at::equal(ya, a2->forward(x.q, x.k, x.v))) << spec.name << ": same seed differs";
    EXPECT_EQ(!at::equal(ya, yb), spec.stochastic)
        << spec.name << ": seeds 1 and 2 " << (spec.stochastic ? "agree" : "differ");
  }
}

TEST(MethodRegistry, KindMatchesTheClassBuilt) {
  for (const auto& spec : attn::method_registry()) {
    if (spec.needs_kernels) continue;
    const attn::MethodShape shape{0, 4, 2, 8, windowed_only(spec) ? attn::Window{2, 4} : attn::Window{}};
    const auto m = attn::make_method(spec.name, shape, 0, nullptr);
    EXPECT_EQ(m->name(), spec.name);
    switch (spec.kind) {
      case attn::MethodKind::exact:
        EXPECT_NE(dynamic_cast<const attn::SoftmaxAttention*>(m.get()), nullptr) << spec.name;
        break;
      case attn::MethodKind::quadratic:
        EXPECT_NE(dynamic_cast<const attn::QuadraticAttention*>(m.get()), nullptr) << spec.name;
        break;
      case attn::MethodKind::feature_map:
        EXPECT_NE(dynamic_cast<const attn::FeatureMapMethod*>(m.get()), nullptr) << spec.name;
        break;
      case attn::MethodKind::window: {
        const auto* w = dynamic_cast<const attn::WindowedAttention*>(m.get());
        ASSERT_NE(w, nullptr) << spec.name;
        EXPECT_EQ(w->base(), nullptr) << spec.name;
        break;
      }
    }
  }
}

// A window on the shape turns every linear method (the quadratic kernels and the
// feature-map baselines) into a windowed layer over it, and is what the windowed-only
// method needs.
TEST(MethodRegistry, WindowOnTheShapeWindowsEveryLinearMethod) {
  const attn::MethodShape shape{0, 4, 2, 8, attn::Window{2, 4}};
  const auto g = attn::make_method("global", shape, 0, nullptr);
  const auto* w = dynamic_cast<const attn::WindowedAttention*>(g.get());
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->name(), "global");
  EXPECT_EQ(w->window(), (attn::Window{2, 4}));
  EXPECT_NE(dynamic_cast<const attn::QuadraticAttention*>(w->base().get()), nullptr);
  EXPECT_NE(dynamic_cast<const attn::SoftmaxAttention*>(attn::make_method("softmax", shape, 0, nullptr).get()), nullptr);
  for (const char* name : {"taylorshift", "performer", "dijiang", "spectraformer"}) {
    const auto m = attn::make_method(name, shape, 0, nullptr);
    const auto* wf = dynamic_cast<const attn::WindowedAttention*>(m.get());
    ASSERT_NE(wf, nullptr) << name;
    EXPECT_EQ(wf->name(), name);
    EXPECT_NE(wf->feature_map(), nullptr) << name;
    EXPECT_EQ(wf->q_heads(), 4) << name;
  }
  EXPECT_THROW(attn::make_method("window", {0, 4, 2, 8}, 0, nullptr), oal::Error);
  EXPECT_THROW(attn::make_method("global", {0, 4, 2, 8, attn::Window{-1, 4}}, 0, nullptr), oal::Error);
  // The default method lists: every method that runs with the window.
  const auto plain = attn::method_names(attn::Window{});
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "window"), 0);
  EXPECT_EQ(plain.size(), attn::method_registry().size() - 1);
  const auto windowed = attn::method_names(attn::Window{4, 64});
  EXPECT_EQ(windowed.size(), attn::method_registry().size());
}
