// The method store (attention/method_store.h), the one format calibration runs and
// converted models keep their attention in: every registered method, with parameters
// moved away from anything its factory would rebuild, reads back as the same attention.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/temp_dir.h"
#include "oal/attention/baselines/feature_method.h"
#include "oal/attention/method_store.h"
#include "oal/attention/registry.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/core/error.h"

namespace attn = oal::attn;

namespace {

constexpr uint64_t k_seed = 5;
const attn::MethodShape k_shape{2, 4, 2, 8};

// Kernels for `layer`: G = 2 groups for a method fitted over groups, else one group;
// perturbed, so that reading back Taylor (the global's default) would not pass.
attn::ModelKernels kernels_for(const attn::MethodSpec& spec) {
  attn::ModelKernels k;
  k.head_dim = k_shape.head_dim;
  const auto groups = spec.fit == attn::Fit::grouped_kernel
                          ? std::vector<std::vector<int64_t>>{{0, 1, 2, 3, 4, 5}, {6, 7}}
                          : attn::QuadraticKernel::single_group(k_shape.head_dim);
  for (int64_t h = 0; h < k_shape.q_heads; ++h)
    k.layers[k_shape.layer].push_back(attn::QuadraticKernel::taylor(groups).perturbed(0.1, 40 + h));
  return k;
}

// A feature-map method's parameters with noise added, so that a reader that rebuilt the
// method from the seed instead of loading them would not pass. perm (SpectraFormer's
// permutation) is left alone: noise would make it no permutation.
void move_parameters(attn::FeatureMapMethod& m) {
  attn::TensorMap params = m.state_dict();
  for (auto& [name, t] : params)
    if (t.is_floating_point()) t = t + 0.05 * at::randn_like(t);
  m.load_state_dict(params);
}

}  // namespace

TEST(MethodStore, EveryRegisteredMethodReadsBackAsTheSameAttention) {
  at::manual_seed(3);
  attn::MethodStore store;
  store.seed = k_seed;
  store.meta = {{"model", "synthetic"}};
  attn::LayerMethods layer{k_shape.layer, {}};
  for (const auto& spec : attn::method_registry()) {
    if (spec.kind == attn::MethodKind::window) continue;  // needs a window: the test below
    store.methods.push_back(spec.name);
    const attn::ModelKernels* kernels = nullptr;
    if (spec.kind == attn::MethodKind::quadratic) {
      store.kernels[spec.name] = kernels_for(spec);
      kernels = &store.kernels[spec.name];
    }
    auto m = attn::make_method(spec.name, k_shape, k_seed, kernels);
    if (auto* fm = dynamic_cast<attn::FeatureMapMethod*>(m.get())) move_parameters(*fm);
    layer.methods[spec.name] = m;
  }
  store.layers.push_back(layer);
  const auto dir = oal::test::make_temp_dir("method_store");
  attn::write_method_store(dir, store);

  const attn::MethodStore back = attn::read_method_store(dir);
  EXPECT_EQ(back.methods, store.methods);
  EXPECT_EQ(back.seed, k_seed);
  EXPECT_EQ(back.meta.at("model"), "synthetic");
  ASSERT_EQ(back.layers.size(), 1u);
  EXPECT_EQ(back.layers[0].layer, k_shape.layer);
  const auto o = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q = at::randn({1, 4, 12, 8}, o), k = at::randn({1, 2, 12, 8}, o),
                   v = at::randn({1, 2, 12, 8}, o);
  for (const auto& spec : attn::method_registry()) {
    if (spec.kind == attn::MethodKind::window) continue;
    const auto& want = layer.methods.at(spec.name);
    const auto& got = back.layers[0].methods.at(spec.name);
    EXPECT_EQ(got->name(), want->name());
    // fp64 inputs and computation; kernel JSON keeps L as shortest round-trip decimal
    // text and safetensors the tensors' bytes, so only fp64 rounding can differ.
    const double diff = (got->forward(q, k, v) - want->forward(q, k, v)).abs().max().item<double>();
    EXPECT_LT(diff, 1e-12) << spec.name;
  }
  std::filesystem::remove_all(dir);
}

TEST(MethodStore, MissingParametersAreANamedError) {
  attn::MethodStore store;
  store.methods = {"taylorshift"};
  store.layers.push_back({k_shape.layer, {{"taylorshift", attn::make_method("taylorshift", k_shape, 0, nullptr)}}});
  const auto dir = oal::test::make_temp_dir("method_store");
  attn::write_method_store(dir, store);
  std::filesystem::remove(dir / "baselines.safetensors");
  try {
    attn::read_method_store(dir);
    FAIL() << "a store without its baselines.safetensors loaded";
  } catch (const oal::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("[calibration_run]", 0), 0u) << m;
    EXPECT_NE(m.find("no parameters for taylorshift layer 2"), std::string::npos) << m;
  }
  std::filesystem::remove_all(dir);
}

// A windowed store: the window in the manifest, each windowed kernel's c_h in
// window.safetensors; read back, every layer is the same windowed attention. Without its
// c_h file the store is refused, naming the key.
TEST(MethodStore, WindowedLayersReadBackWithTheirWindowAndLogScales) {
  attn::MethodStore store;
  store.methods = {"oal", "global", "window"};
  store.window = {2, 5};
  attn::MethodShape shape = k_shape;
  shape.window = store.window;
  attn::LayerMethods layer{k_shape.layer, {}};
  for (const auto& name : store.methods) {
    const attn::MethodSpec& spec = attn::method_spec(name);
    const attn::ModelKernels* kernels = nullptr;
    if (spec.kind == attn::MethodKind::quadratic) {
      store.kernels[name] = kernels_for(spec);
      kernels = &store.kernels[name];
    }
    auto m = attn::make_method(name, shape, k_seed, kernels);
    if (auto* w = dynamic_cast<attn::WindowedAttention*>(m.get()); w && w->base())
      w->load_log_scale(at::randn({k_shape.q_heads}, at::kFloat));
    layer.methods[name] = m;
  }
  store.layers.push_back(layer);
  const auto dir = oal::test::make_temp_dir("method_store_windowed");
  attn::write_method_store(dir, store);
  const attn::MethodStore back = attn::read_method_store(dir);
  EXPECT_EQ(back.window, store.window);
  const auto o = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q = at::randn({1, 4, 12, 8}, o), k = at::randn({1, 2, 12, 8}, o),
                   v = at::randn({1, 2, 12, 8}, o);
  for (const auto& name : store.methods) {
    const auto& got = back.layers.at(0).methods.at(name);
    EXPECT_NE(dynamic_cast<const attn::WindowedAttention*>(got.get()), nullptr) << name;
    EXPECT_EQ(got->fingerprint(), layer.methods.at(name)->fingerprint()) << name;
    // c_h stored as fp32 bytes, L as round-trip decimal text: fp64 rounding only.
    const double diff = (got->forward(q, k, v) - layer.methods.at(name)->forward(q, k, v)).abs().max().item<double>();
    EXPECT_LT(diff, 1e-12) << name;
  }
  std::filesystem::remove(dir / "window.safetensors");
  try {
    attn::read_method_store(dir);
    FAIL() << "a windowed store without its window.safetensors loaded";
  } catch (const oal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("oal.layers.2.log_scale"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

