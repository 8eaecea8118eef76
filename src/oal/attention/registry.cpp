#include "oal/attention/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "oal/attention/baselines/dijiang.h"
#include "oal/attention/baselines/performer.h"
#include "oal/attention/baselines/spectraformer.h"
#include "oal/attention/baselines/taylorshift.h"
#include "oal/attention/method_names.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/softmax/softmax_method.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/core/error.h"
#include "oal/simd/oal_plan.h"

namespace oal::attn {
namespace {

using Ptr = std::shared_ptr<AttentionMethod>;

// Packed lower triangle of L [(G+1) x (G+1)] per query head.
int64_t quadratic_params(const MethodShape& s, int64_t groups) {
  return s.q_heads * (groups + 1) * (groups + 2) / 2;
}

Ptr make_softmax(const MethodShape&, uint64_t, const ModelKernels*) {
  return std::make_shared<SoftmaxAttention>();
}

Ptr make_oal(const MethodShape& s, uint64_t, const ModelKernels* kernels) {
  check(kernels != nullptr, "make_method", "method '{}' needs fitted kernels for layer {}",
        names::oal, s.layer);
  return make_quadratic_method(kernels->layer(s.layer));
}

Ptr make_global(const MethodShape& s, uint64_t, const ModelKernels* kernels) {
  if (kernels) return make_quadratic_method(kernels->layer(s.layer));
  const auto taylor = QuadraticKernel::taylor(QuadraticKernel::single_group(s.head_dim));
  return make_quadratic_method(std::vector<QuadraticKernel>(s.q_heads, taylor));
}

Ptr make_window(const MethodShape& s, uint64_t, const ModelKernels*) {
  check(s.window.recent >= 1, "make_method",
        "method '{}' needs a window of at least 1 token (--window W), got {}", names::window,
        s.window.describe());
  return std::make_shared<WindowedAttention>(nullptr, s.window, at::zeros({1}));
}

const std::vector<MethodSpec> k_methods = {
    {names::softmax, "exact causal softmax attention (the reference)", MethodKind::exact,
     Fit::none, false, false, [](const MethodShape&, int64_t) -> int64_t { return 0; },
     [](int64_t) { return FeatureSize{0, 0}; }, make_softmax},
    {names::oal, "outlier-aware grouped quadratic kernel, L per query head (paper Eq. 3)",
     MethodKind::quadratic, Fit::grouped_kernel, true, false, quadratic_params,
     [](int64_t d) { return FeatureSize{simd::oal_feature_dim(d), 4}; }, make_oal,
     names::global},
    {names::global, "learned global quadratic a + b s + c s^2 (OAL with one group)",
     MethodKind::quadratic, Fit::global_kernel, false, false,
     [](const MethodShape& s, int64_t) { return quadratic_params(s, 1); },
     [](int64_t d) { return FeatureSize{simd::oal_feature_dim(d), 4}; }, make_global},
    {names::taylorshift, "TaylorShift: 1 + s + s^2/2 on l2-normalised q, k, tau per head",
     MethodKind::feature_map, Fit::taylorshift_tau, false, false,
     [](const MethodShape& s, int64_t) { return s.q_heads; },
     [](int64_t d) { return FeatureSize{1 + d + d * (d + 1) / 2, 4}; },
     [](const MethodShape& s, uint64_t, const ModelKernels*) -> Ptr {
       return TaylorShiftAttention::init(s.q_heads, s.kv_heads, s.head_dim);
     }},
    {names::performer, "Performer FAVOR+: 250 positive orthogonal random features, fixed",
     MethodKind::feature_map, Fit::none, false, true,
     [](const MethodShape&, int64_t) -> int64_t { return 0; },
     [](int64_t) { return FeatureSize{k_performer_features, 8}; },
     [](const MethodShape& s, uint64_t seed, const ModelKernels*) -> Ptr {
       return PerformerAttention::init(s.q_heads, s.kv_heads, s.head_dim, s.layer, seed);
     }},
    {names::dijiang, "DiJiang: DCT features with learned weights exp(theta) per head",
     MethodKind::feature_map, Fit::dijiang_theta, false, true,
     [](const MethodShape& s, int64_t) { return s.q_heads * s.head_dim; },
     [](int64_t d) { return FeatureSize{d, 4}; },
     [](const MethodShape& s, uint64_t seed, const ModelKernels*) -> Ptr {
       return DiJiangAttention::init(s.q_heads, s.kv_heads, s.head_dim, s.layer, seed);
     }},
    {names::spectraformer, "SpectraFormer: OPRF features, learned FastFood projection per layer",
     MethodKind::feature_map, Fit::spectraformer_fastfood, false, true,
     [](const MethodShape& s, int64_t) { return 3 * s.head_dim; },
     [](int64_t d) { return FeatureSize{d + 1, 8}; },
     [](const MethodShape& s, uint64_t seed, const ModelKernels*) -> Ptr {
       return SpectraFormerAttention::init(s.q_heads, s.kv_heads, s.head_dim, s.layer, seed);
     }},
    {names::window, "windowed-only: exact softmax on S sink tokens and the last W tokens",
     MethodKind::window, Fit::none, false, false,
     [](const MethodShape&, int64_t) -> int64_t { return 0; },
     [](int64_t) { return FeatureSize{0, 0}; }, make_window},
};

}  // namespace

const std::vector<MethodSpec>& method_registry() { return k_methods; }

const MethodSpec& method_spec(std::string_view name) {
  for (const auto& m : k_methods)
    if (name == m.name) return m;
  fail("method", "unknown method '{}' (known: {})", name, method_list());
}

std::vector<std::string> method_names() {
  std::vector<std::string> out;
  for (const auto& m : k_methods) out.emplace_back(m.name);
  return out;
}

std::vector<std::string> method_names(const Window& window) {
  std::vector<std::string> out;
  for (const auto& m : k_methods)
    if (!window.none() || m.kind != MethodKind::window) out.emplace_back(m.name);
  return out;
}

std::vector<std::string> method_names(MethodKind kind) {
  std::vector<std::string> out;
  for (const auto& m : k_methods)
    if (m.kind == kind) out.emplace_back(m.name);
  return out;
}

std::string method_list(std::string_view sep) {
  std::string out;
  for (const auto& m : k_methods) {
    if (!out.empty()) out += sep;
    out += m.name;
  }
  return out;
}

void check_method_names(const std::vector<std::string>& names, std::string_view op) {
  for (const auto& n : names)
    check(std::any_of(k_methods.begin(), k_methods.end(),
                      [&](const MethodSpec& m) { return n == m.name; }),
          op, "unknown method '{}' (known: {})", n, method_list());
}

const MethodSpec& reference_method() {
  for (const auto& m : k_methods)
    if (m.kind == MethodKind::exact) return m;
  fail("method", "the registry has no exact method");
}

Ptr make_method(std::string_view name, const MethodShape& s, uint64_t seed,
                const ModelKernels* kernels) {
  check(s.q_heads > 0 && s.kv_heads > 0 && s.head_dim > 0 && s.q_heads % s.kv_heads == 0,
        "make_method", "bad layer shape: {} query heads, {} KV heads, head dim {}", s.q_heads,
        s.kv_heads, s.head_dim);
  check_method_names({std::string(name)}, "make_method");
  s.window.validate("make_method");
  const MethodSpec& spec = method_spec(name);
  Ptr m = spec.make(s, seed, kernels);
  if (s.window.none() || spec.kind == MethodKind::exact || spec.kind == MethodKind::window)
    return m;
  // Every linear method's kernel beside the window; c_h starts at 0 (calibration fits it).
  const auto* quadratic = dynamic_cast<const QuadraticAttention*>(m.get());
  const int64_t heads = quadratic ? quadratic->kernels().heads() : s.q_heads;
  return std::make_shared<WindowedAttention>(m, s.window, at::zeros({heads}, at::kFloat));
}

Ptr make_quadratic_method(const std::vector<QuadraticKernel>& kernels) {
  return std::make_shared<QuadraticAttention>(QuadraticAttention::from_kernels(kernels, {}, false));
}

}  // namespace oal::attn
