// The registry's traits say what the methods do: `stochastic` methods draw their initial
// parameters from the seed (two seeds give two different attentions), the others do not;
// `kind` matches the class a method builds.
#include <gtest/gtest.h>

#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/oal/oal_method.h"
#include "oal/attention/registry.h"
#include "oal/attention/softmax/softmax_method.h"

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
}  // namespace

TEST(MethodRegistry, StochasticMethodsDependOnTheSeedAndOnlyThey) {
  const Qkv x = inputs();
  const attn::MethodShape shape{3, 4, 2, 8};
  for (const auto& spec : attn::method_registry()) {
    if (spec.needs_kernels) continue;  // oal is built from fitted kernels, no seed enters
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
  const attn::MethodShape shape{0, 4, 2, 8};
  for (const auto& spec : attn::method_registry()) {
    if (spec.needs_kernels) continue;
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
    }
  }
}
