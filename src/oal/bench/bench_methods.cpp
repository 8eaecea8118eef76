#include "oal/bench/bench_methods.h"

#include <ATen/core/grad_mode.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "oal/attention/method_names.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/oal/quadratic.h"
#include "oal/attention/registry.h"
#include "oal/attention/simd_path.h"
#include "oal/attention/softmax/softmax_method.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/bench/bench.h"
#include "oal/core/error.h"
#include "oal/simd/flash_softmax.h"
#include "oal/simd/oal_prefill.h"

namespace oal::bench {
namespace {

int64_t elem_bytes(at::ScalarType t) { return static_cast<int64_t>(c10::elementSize(t)); }

double scale_of(const BenchShape& s) { return 1.0 / std::sqrt(static_cast<double>(s.dim)); }

// The kernels' view of the benchmarked shape with q_len queries after k_len keys.
simd::AttentionDims dims_of(const BenchShape& s, int64_t q_len, int64_t k_len) {
  simd::AttentionDims d;
  d.batch = s.batch;
  d.q_heads = s.q_heads;
  d.kv_heads = s.kv_heads;
  d.q_len = q_len;
  d.k_len = k_len;
  d.dim = s.dim;
  d.value_dim = s.value_dim;
  return d;
}

// ---- the library's own entry points ---------------------------------------------------

// Decoding through an AttentionMethod's DecodeState: what the model runs per token.
// prime() records the path in `notice` like the prefill (see attach_method).
class AttentionDecoder : public BenchDecoder {
 public:
  AttentionDecoder(std::shared_ptr<const attn::AttentionMethod> m, int64_t batch,
                   std::shared_ptr<std::string> notice, bool dispatches)
      : state_(m->new_state(batch)), notice_(std::move(notice)), dispatches_(dispatches) {}
  void prime(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    at::NoGradGuard ng;
    *notice_ = dispatches_ ? attn::simd_path(attn::simd_blocker(q, k, v)) : "aten";
    state_->absorb(q, k, v);
  }
  void step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& y) override {
    at::NoGradGuard ng;
    y.copy_(state_->step(q, k, v));
  }
  int64_t state_bytes() const override { return state_->state_bytes(); }

 private:
  std::unique_ptr<attn::DecodeState> state_;
  std::shared_ptr<std::string> notice_;
  bool dispatches_;
};

// Prefill and decode through `method` (forward / new_state), recording in the row's note
// the path its entry point took: "simd (avx512)" or "reference (why)" for methods that
// dispatch to the CPU kernels, "aten" for the others (the baselines).
// `trained`: the same layer with trainable parameters, for the train mode (nullptr: none).
void attach_method(BenchMethod& m, std::shared_ptr<const attn::AttentionMethod> method,
                   const BenchShape& s, bool dispatches,
                   std::shared_ptr<const attn::AttentionMethod> trained = nullptr) {
  auto notice = m.notice;
  if (trained)
    m.train = [trained](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      return trained->forward(q, k, v);
    };
  m.prefill = [method, notice, dispatches](const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v) {
    at::NoGradGuard ng;
    *notice = dispatches ? attn::simd_path(attn::simd_blocker(q, k, v)) : "aten";
    return method->forward(q, k, v);
  };
  m.decoder = [method, s, notice, dispatches](at::ScalarType,
                                              int64_t) -> std::unique_ptr<BenchDecoder> {
    return std::make_unique<AttentionDecoder>(method, s.batch, notice, dispatches);
  };
}

BenchMethod softmax_common(const BenchShape& s, std::string name) {
  BenchMethod m;
  m.name = std::move(name);
  m.quadratic = true;
  m.prefill_flops = [s](int64_t n) { return softmax_prefill_flops(s, n); };
  m.decode_flops = [s](int64_t n) { return softmax_decode_flops(s, n); };
  m.state_bytes = [s](int64_t n, at::ScalarType t) {
    return s.batch * s.kv_heads * n * (s.dim + s.value_dim) * elem_bytes(t);
  };
  return m;
}

// The flash kernel's GEMMs at its default blocks, as it tiles the call (flash_tiling):
// scores rows x keys x D and their product with V, rows x Dv x keys, for every visible
// query-key pair (the FLOP model's split between D and Dv).
std::vector<GemmWork> flash_prefill_gemms(const BenchShape& s, int64_t n) {
  const simd::FlashOptions f;
  const simd::FlashTiling t = simd::flash_tiling(dims_of(s, n, n), f);
  const int64_t rows = t.block * t.heads, keys = std::min(f.k_block, n);
  const double per_dim = softmax_prefill_flops(s, n) / (2.0 * s.dim + 2.0 * s.value_dim);
  return {{{rows, keys, s.dim}, 2.0 * s.dim * per_dim},
          {{rows, s.value_dim, keys}, 2.0 * s.value_dim * per_dim}};
}

BenchMethod softmax_flash(const BenchShape& s) {
  BenchMethod m = softmax_common(s, "softmax-flash");
  m.prefill_gemms = [s](int64_t n) { return flash_prefill_gemms(s, n); };
  auto softmax = std::make_shared<attn::SoftmaxAttention>();
  attach_method(m, softmax, s, true, softmax);  // no parameters: the same layer trains
  // Decode keeps K and V in fp32 (the kernels' storage) whatever the input dtype.
  m.state_bytes = [s](int64_t n, at::ScalarType) {
    return s.batch * s.kv_heads * n * (s.dim + s.value_dim) * int64_t{4};
  };
  return m;
}

// ---- softmax-torch: what a LibTorch 1.13 user writes (no SDPA there) ------------------

at::Tensor torch_softmax_prefill(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 double scale) {
  const int64_t group = q.size(1) / k.size(1), n = q.size(2);
  const at::Tensor kr = k.repeat_interleave(group, 1), vr = v.repeat_interleave(group, 1);
  at::Tensor scores = at::matmul(q, kr.transpose(-2, -1)).mul_(scale);
  const at::Tensor mask = at::ones({n, n}, q.options().dtype(at::kBool)).triu_(1);
  scores.masked_fill_(mask, -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1), vr);
}

class TorchDecoder : public BenchDecoder {
 public:
  TorchDecoder(const BenchShape& s, at::ScalarType dtype, int64_t cap) : s_(s), cap_(cap) {
    k_ = at::zeros({s.batch, s.kv_heads, cap, s.dim}, at::TensorOptions().dtype(dtype));
    v_ = at::zeros({s.batch, s.kv_heads, cap, s.value_dim}, at::TensorOptions().dtype(dtype));
  }
  void prime(const at::Tensor&, const at::Tensor& k, const at::Tensor& v) override {
    const int64_t n = k.size(2);
    check(len_ + n <= cap_, "bench", "decoder capacity {} exceeded", cap_);
    k_.narrow(2, len_, n).copy_(k);
    v_.narrow(2, len_, n).copy_(v);
    len_ += n;
  }
  void step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& y) override {
    check(len_ < cap_, "bench", "decoder capacity {} exceeded", cap_);
    k_.select(2, len_).copy_(k);
    v_.select(2, len_).copy_(v);
    ++len_;
    const int64_t group = s_.q_heads / s_.kv_heads;
    const at::Tensor qg = q.reshape({s_.batch, s_.kv_heads, group, s_.dim});
    const at::Tensor kn = k_.narrow(2, 0, len_), vn = v_.narrow(2, 0, len_);
    const at::Tensor p = at::softmax(at::matmul(qg, kn.transpose(-2, -1)).mul_(scale_of(s_)), -1);
    y.copy_(at::matmul(p, vn).reshape({s_.batch, s_.q_heads, s_.value_dim}));
  }
  int64_t state_bytes() const override {
    return s_.batch * s_.kv_heads * len_ * (s_.dim + s_.value_dim) * k_.element_size();
  }

 private:
  BenchShape s_;
  int64_t cap_, len_ = 0;
  at::Tensor k_, v_;
};

BenchMethod softmax_torch(const BenchShape& s) {
  BenchMethod m = softmax_common(s, "softmax-torch");
  *m.notice = "aten";  // plain ATen ops, no dispatch
  m.prefill = [s](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return torch_softmax_prefill(q, k, v, scale_of(s));
  };
  // Scores and their softmax ([B, Hq, N, N] each, input dtype) dominate.
  m.prefill_bytes = [s](int64_t n, at::ScalarType t) {
    return 2 * s.batch * s.q_heads * n * n * elem_bytes(t);
  };
  m.decoder = [s](at::ScalarType t, int64_t cap) -> std::unique_ptr<BenchDecoder> {
    return std::make_unique<TorchDecoder>(s, t, cap);
  };
  return m;
}

// ---- oal / global on the CPU kernels ---------------------------------------------------

// The OAL prefill kernel's GEMMs (simd/oal_prefill.cpp), with the FLOPs
// oal_prefill_flops counts for each (the denominator channel with its GEMM): the readout
// (a KV group's query heads x chunk rows against the state, K = Df), the state update
// (features transposed x values, K = chunk) and the intra-chunk scores and products
// (counted at full head dim; the kernel splits the scores by group).
std::vector<GemmWork> oal_prefill_gemms(const BenchShape& s, int64_t n) {
  const int64_t C = std::min(s.chunk, n), df = simd::oal_feature_dim(s.dim);
  const double T = static_cast<double>(n), dv1 = s.value_dim + 1.0;
  double pairs = 0;  // intra-chunk (query, key) pairs per head
  for (int64_t c0 = 0; c0 < n; c0 += s.chunk) pairs += std::pow(std::min(s.chunk, n - c0), 2.0);
  const double B = static_cast<double>(s.batch);
  return {{{s.q_heads / s.kv_heads * C, s.value_dim, df}, 2.0 * B * s.q_heads * T * df * dv1},
          {{df, s.value_dim, C, true}, 2.0 * B * s.kv_heads * T * df * dv1},
          {{C, C, s.dim}, B * s.q_heads * pairs * 2.0 * s.dim},
          {{C, s.value_dim, C}, B * s.q_heads * pairs * 2.0 * dv1}};
}

BenchMethod quadratic_method(const BenchShape& s, std::string name, int64_t groups) {
  BenchMethod m;
  m.name = std::move(name);
  attn::HdOptions options;
  options.chunk = s.chunk;
  options.chunked_train_from = s.chunked_train_from;
  // The layer's fp32 plan is built once (cached by the method), as in App. E.
  attach_method(m, std::make_shared<attn::QuadraticAttention>(bench_kernels(s, groups), options), s,
                true,
                std::make_shared<attn::QuadraticAttention>(bench_kernels(s, groups), options,
                                                           /*trainable=*/true));
  m.prefill_flops = [s](int64_t n) { return simd::oal_prefill_flops(dims_of(s, n, n), s.chunk); };
  m.prefill_gemms = [s](int64_t n) { return oal_prefill_gemms(s, n); };
  m.decode_flops = [s](int64_t) { return oal_decode_flops(s); };
  m.state_bytes = [s](int64_t, at::ScalarType) {
    return s.batch * s.kv_heads * simd::oal_feature_dim(s.dim) * (s.value_dim + 1) *
           static_cast<int64_t>(sizeof(float));
  };
  return m;
}

// A windowed row: the bench kernels (G groups for oal, 1 for global) beside shape.window,
// or the windowed-only method. No FLOP model (the exact band and the shifted kernel part
// are not modelled); state bytes are the HD state plus S + W key and value rows.
BenchMethod windowed_method(const BenchShape& s, const std::string& name) {
  check(s.window.recent >= 1, "bench", "'{}' needs a window: --window W (>= 1) and --sinks S",
        name);
  BenchMethod m;
  m.name = name;
  std::shared_ptr<const attn::QuadraticAttention> base, trained_base;
  if (name != attn::names::window) {
    attn::HdOptions options;
    options.chunk = s.chunk;
    options.chunked_train_from = s.chunked_train_from;
    const int64_t groups = name == "oal+window" ? s.oal_groups : 1;
    base = std::make_shared<attn::QuadraticAttention>(bench_kernels(s, groups), options);
    trained_base = std::make_shared<attn::QuadraticAttention>(bench_kernels(s, groups), options,
                                                              /*trainable=*/true);
  }
  const at::Tensor c = at::zeros({s.q_heads});
  attach_method(m, std::make_shared<attn::WindowedAttention>(base, s.window, c), s, true,
                std::make_shared<attn::WindowedAttention>(trained_base, s.window, c,
                                                          /*trainable=*/true));
  m.state_bytes = [s, base](int64_t n, at::ScalarType t) {
    const int64_t rows = std::min(n, s.window.sinks + s.window.recent);
    // Rows are kept in the compute dtype: fp32 for fp32 and bf16 inputs.
    const int64_t kv = s.batch * s.kv_heads * rows * (s.dim + s.value_dim) * int64_t(sizeof(float));
    const int64_t hd = base ? s.batch * s.kv_heads * simd::oal_feature_dim(s.dim) *
                                  (s.value_dim + 1) * int64_t(sizeof(float))
                            : 0;
    (void)t;
    return kv + hd;
  };
  return m;
}

// Whole-sequence feature maps dominate a baseline's prefill memory: q and k features
// [B, Hq + Hkv, N, F] plus about two temporaries of that size (F and its element size
// from the method registry).
int64_t baseline_feature_bytes(const attn::MethodSpec& spec, const BenchShape& s, int64_t n) {
  const attn::FeatureSize f = spec.features(s.dim);
  return 3 * s.batch * (s.q_heads + s.kv_heads) * n * f.dim * f.element_bytes;
}

// A feature-map baseline through its AttentionMethod (initial parameters; speed does not
// depend on fitted values): ATen code, no FLOP model.
BenchMethod baseline_method(const attn::MethodSpec& spec, const BenchShape& s) {
  const attn::MethodShape ms{0, s.q_heads, s.kv_heads, s.dim};
  BenchMethod m = bench_method_from_attention(attn::make_method(spec.name, ms, s.seed, nullptr), s);
  m.name = spec.name;
  m.prefill_bytes = [s, &spec](int64_t n, at::ScalarType) {
    return baseline_feature_bytes(spec, s, n);
  };
  return m;
}

}  // namespace

attn::LayerKernels bench_kernels(const BenchShape& s, int64_t groups) {
  std::vector<attn::QuadraticKernel> heads;
  for (int64_t h = 0; h < s.q_heads; ++h) {
    std::vector<std::vector<int64_t>> g(static_cast<size_t>(groups));
    for (int64_t r = 0; r < s.dim; ++r) {
      const int64_t slot = (r * 7 + h * 3) % s.dim;  // a per-head shuffle of the dims
      const int64_t gi = slot < 2 * (groups - 1) ? 1 + slot / 2 : 0;
      g[static_cast<size_t>(gi)].push_back(r);
    }
    heads.push_back(attn::QuadraticKernel::taylor(g).perturbed(0.05, s.seed + 17 * h));
  }
  return attn::LayerKernels::from(heads, at::kFloat);
}

std::vector<std::string> bench_method_names() {
  std::vector<std::string> out{"softmax-flash", "softmax-torch"};
  for (const auto& spec : attn::method_registry())
    if (spec.kind != attn::MethodKind::exact && spec.kind != attn::MethodKind::window)
      out.emplace_back(spec.name);
  for (const char* n : {"oal+window", "global+window", attn::names::window}) out.emplace_back(n);
  return out;
}

BenchMethod make_bench_method(const std::string& name, const BenchShape& shape) {
  if (name == "softmax-flash") return softmax_flash(shape);
  if (name == "softmax-torch") return softmax_torch(shape);
  const auto names = bench_method_names();
  check(std::find(names.begin(), names.end(), name) != names.end(), "bench",
        "unknown method '{}': expected one of {}", name, fmt::join(names, ", "));
  if (name == "oal+window" || name == "global+window" || name == attn::names::window)
    return windowed_method(shape, name);
  const attn::MethodSpec& spec = attn::method_spec(name);
  if (spec.kind == attn::MethodKind::quadratic)
    return quadratic_method(shape, name,
                            spec.fit == attn::Fit::grouped_kernel ? shape.oal_groups : 1);
  return baseline_method(spec, shape);
}

BenchMethod bench_method_from_attention(std::shared_ptr<const attn::AttentionMethod> method,
                                        const BenchShape& shape) {
  BenchMethod m;
  m.name = method->name();
  // Softmax and the quadratic kernels dispatch to the CPU kernels; the baselines run ATen.
  const bool dispatches = attn::method_spec(m.name).kind != attn::MethodKind::feature_map;
  attach_method(m, std::move(method), shape, dispatches);
  return m;
}

}  // namespace oal::bench
