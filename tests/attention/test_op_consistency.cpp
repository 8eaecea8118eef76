// Op consistency, in the spirit of llama.cpp's test-backend-ops: every fast path of the
// attention operators against its plain reference, over one shared sweep of shapes
// (GQA ratios 1-7, head dims 4-64, lengths 1-1000, chunk sizes that do and do not divide
// the length), dtypes (fp64, fp32, bf16) and, for paths that run the CPU kernels, every
// SIMD target this CPU has (an AVX-512 machine also runs AVX2, SSE4 and scalar).
//
// One metric: the normalised Frobenius error ||fast - ref||_F / ||ref||_F, computed in
// fp64 against a reference evaluated in fp64 on the same (dtype-rounded) inputs, so input
// rounding is never counted as error. Each op states its tolerance per dtype and why.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/oal/references.h"
#include "oal/attention/qkv_shape.h"
#include "oal/attention/softmax/softmax.h"
#include "oal/attention/softmax/softmax_method.h"
#include "oal/io/gguf_quants.h"
#include "oal/simd/flash_softmax.h"
#include "oal/simd/isa.h"
#include "oal/simd/oal_decode.h"
#include "oal/simd/oal_plan.h"
#include "oal/simd/oal_prefill.h"
#include "test_util.h"

namespace oal::attn {
namespace {

using oal::test::randn;
using oal::test::rel_err;

struct Case {
  int64_t batch, hq, hkv, d, dv, T, chunk;
  bool every_target;  // false: only the active SIMD target (long cases; scalar is slow)
};

// The shared sweep. Covers T = 1 and 2, lengths one below / at / above a chunk, chunks
// that do not divide T (7, 100), GQA ratios 1, 2, 3, 7, 9, and the paper's shapes (d 64).
const std::vector<Case>& sweep() {
  static const std::vector<Case> cases = {
      {1, 1, 1, 4, 2, 1, 64, true},      {1, 2, 1, 8, 8, 2, 16, true},
      {1, 2, 1, 8, 8, 65, 16, true},     {2, 4, 2, 16, 8, 100, 32, true},
      {1, 6, 2, 8, 5, 37, 7, true},      {1, 7, 1, 8, 8, 257, 64, true},
      {1, 2, 2, 16, 64, 63, 100, true},  {1, 14, 2, 64, 64, 130, 64, true},
      {1, 9, 1, 16, 72, 40, 16, true},  // 9 heads: more than one 7-head register block
      {1, 7, 1, 64, 64, 1000, 64, false}};
  return cases;
}

struct Inputs {
  at::Tensor q, k, v;
};

// q, k with one larger (outlier-like) dimension, as the method is meant for; scaled so
// the logits q·k/sqrt(d) are O(1) like real attention. v ~ N(0, 1).
Inputs make_inputs(const Case& c, uint64_t seed) {
  Inputs in{randn({c.batch, c.hq, c.T, c.d}, seed, 0.6), randn({c.batch, c.hkv, c.T, c.d}, seed + 1, 0.6),
            randn({c.batch, c.hkv, c.T, c.dv}, seed + 2, 1.0)};
  in.q.select(3, 0).mul_(3.0);
  in.k.select(3, 0).mul_(3.0);
  return in;
}

Inputs cast(const Inputs& in, at::ScalarType dt) { return {in.q.to(dt), in.k.to(dt), in.v.to(dt)}; }

struct Op {
  std::string name;
  bool kernel_backed;  // fp32/bf16 inputs run the CPU kernels: sweep the SIMD targets
  std::vector<at::ScalarType> dtypes;
  // Cases the op runs on (references that are O(T d²) per token skip the big ones).
  std::function<bool(const Case&)> applies;  // empty: every case
  std::function<at::Tensor(const Case&, const Inputs&, const LayerKernels&)> fast, reference;
  std::function<double(at::ScalarType)> tolerance;
};

// Concatenates extend() outputs of a decoder fed a third of the tokens at once, then
// single tokens (the decode kernels), then the rest in one call.
at::Tensor decode_in_pieces(DecodeState& st, const Inputs& in) {
  const int64_t T = in.q.size(2), first = T / 3, last = std::min<int64_t>(3, T - first);
  std::vector<at::Tensor> ys;
  auto feed = [&](int64_t t, int64_t n) {
    if (n > 0) ys.push_back(st.extend(in.q.narrow(2, t, n), in.k.narrow(2, t, n), in.v.narrow(2, t, n)));
  };
  feed(0, first);
  for (int64_t t = first; t < T - last; ++t) feed(t, 1);
  feed(T - last, last);
  return at::cat(ys, 2);
}

// The kernels' raw interface (contiguous fp32 arrays), for the parameters the entry
// points choose themselves: sequence segments scanned in parallel, per-token decode steps
// and flash block sizes.
simd::AttentionDims dims_of(const Inputs& in) {
  return check_qkv("test", in.q, in.k, in.v, false);
}

at::Tensor f32(const at::Tensor& t) { return t.to(at::kFloat).contiguous(); }

at::Tensor kernel_prefill_segments(const Case& c, const Inputs& in, const LayerKernels& lk) {
  const auto plan = simd::OalPlan::build(lk.group_of, lk.L, lk.eps);
  const at::Tensor q = f32(in.q), k = f32(in.k), v = f32(in.v);
  at::Tensor y = at::empty({c.batch, c.hq, c.T, c.dv}, at::kFloat);
  simd::OalPrefillOptions opt;
  opt.chunk = c.chunk;
  opt.segments = 3;  // more than one segment whenever T allows: the cross-segment merge
  simd::oal_prefill_f32(dims_of(in), plan, q.data_ptr<float>(), k.data_ptr<float>(),
                        v.data_ptr<float>(), y.data_ptr<float>(), nullptr, opt);
  return y;
}

at::Tensor kernel_decode_steps(const Case& c, const Inputs& in, const LayerKernels& lk) {
  const auto plan = simd::OalPlan::build(lk.group_of, lk.L, lk.eps);
  at::Tensor state = at::zeros({c.batch, c.hkv, plan.feature_dim(), c.dv + 1}, at::kFloat);
  simd::OalDecodeWorkspace ws(c.batch, c.hkv, c.hq / c.hkv, c.d, c.dv);
  std::vector<at::Tensor> ys;
  for (int64_t t = 0; t < c.T; ++t) {
    const at::Tensor q = f32(in.q.select(2, t)), k = f32(in.k.select(2, t)), v = f32(in.v.select(2, t));
    at::Tensor y = at::empty({c.batch, c.hq, c.dv}, at::kFloat);
    simd::oal_decode_step_f32(plan, c.hkv, q.data_ptr<float>(), k.data_ptr<float>(),
                              v.data_ptr<float>(), y.data_ptr<float>(), state.data_ptr<float>(),
                              ws);
    ys.push_back(y.unsqueeze(2));
  }
  return at::cat(ys, 2);
}

at::Tensor kernel_flash_blocks(const Case& c, const Inputs& in, const LayerKernels&) {
  const at::Tensor q = f32(in.q), k = f32(in.k), v = f32(in.v);
  at::Tensor y = at::empty({c.batch, c.hq, c.T, c.dv}, at::kFloat);
  simd::FlashOptions opt;
  opt.q_block = 16;  // blocks that do not match each other or the default
  opt.k_block = 48;
  simd::flash_softmax_f32(dims_of(in), q.data_ptr<float>(), k.data_ptr<float>(),
                          v.data_ptr<float>(), y.data_ptr<float>(),
                          float(1.0 / std::sqrt(double(c.d))), opt);
  return y;
}

// The f16-cache kernel on a hand-built cache: Kᵀ rows padded past S (ldkt = S + 5) and
// V with spare rows (a cache's capacity), odd blocks, so the widening's tails and
// strides are exercised, not only the entry point's defaults.
at::Tensor kernel_flash_f16(const Case& c, const Inputs& in, const LayerKernels&) {
  const at::Tensor q = f32(in.q);
  const int64_t S = c.T;
  at::Tensor kt = at::zeros({c.batch, c.hkv, c.d, S + 5}, at::kHalf);
  kt.narrow(3, 0, S).copy_(in.k.transpose(2, 3));
  at::Tensor v = at::zeros({c.batch, c.hkv, S + 3, c.dv}, at::kHalf);
  v.narrow(2, 0, S).copy_(in.v);
  at::Tensor y = at::empty({c.batch, c.hq, c.T, c.dv}, at::kFloat);
  simd::FlashOptions opt;
  opt.q_block = 16;
  opt.k_block = 48;
  simd::flash_softmax_kt_f16(dims_of(in), q.data_ptr<float>(),
                             reinterpret_cast<const uint16_t*>(kt.data_ptr<at::Half>()), S + 5,
                             reinterpret_cast<const uint16_t*>(v.data_ptr<at::Half>()), S + 3,
                             y.data_ptr<float>(), float(1.0 / std::sqrt(double(c.d))), opt);
  return y;
}

// What an f16 KV cache must compute: exact softmax over the keys and values rounded to
// half precision (the queries are not cached and stay as given).
at::Tensor naive_on_half_kv(const Case&, const Inputs& in, const LayerKernels&) {
  auto half = [](const at::Tensor& t) { return t.to(at::kHalf).to(at::kDouble); };
  return softmax_attention_naive(in.q, half(in.k), half(in.v));
}

// What a q8_0 KV cache must compute: exact softmax over keys and values rounded as the
// cache stores them, each token's row quantized per 32 values by io::quantize (ggml's
// reference quantizer, itself checked against the gguf package) and decoded again.
at::Tensor q8_rounded(const at::Tensor& t) {
  const at::Tensor f = t.to(at::kFloat).contiguous();
  at::Tensor out = at::empty_like(f);
  const auto q8 = static_cast<uint32_t>(oal::io::GgmlType::Q8_0);
  std::vector<uint8_t> bytes(oal::io::ggml_nbytes(q8, f.size(-1)));
  for (int64_t r = 0; r < f.numel() / f.size(-1); ++r) {
    oal::io::quantize(q8, f.data_ptr<float>() + r * f.size(-1), f.size(-1), bytes.data());
    oal::io::dequantize(q8, bytes.data(), f.size(-1), out.data_ptr<float>() + r * f.size(-1));
  }
  return out.to(at::kDouble);
}
at::Tensor naive_on_q8_kv(const Case&, const Inputs& in, const LayerKernels&) {
  return softmax_attention_naive(in.q, q8_rounded(in.k), q8_rounded(in.v));
}

// Tolerances (the reasons are the point):
// * fp64 paths differ from the fp64 reference only in summation order and the expanded
//   vs factored form of the same polynomial: ~1e-15 per term, 1e-10 leaves room at N 1000.
// * fp32 OAL: rounding (6e-8) of features up to q_r q_t k_r k_t ~ 10-30 and of sums over
//   up to 1000 keys, partly cancelling in the expanded readout: measured ~1e-6..1e-5;
//   1e-4 bounds it, while a wrong chunk boundary, mask or group gives O(0.1).
// * bf16 OAL: computed in fp32 from the bf16 inputs, the output rounded to bf16 (2^-9
//   relative per element): 5e-3.
double oal_tolerance(at::ScalarType dt) {
  return dt == at::kDouble ? 1e-10 : dt == at::kFloat ? 1e-4 : 5e-3;
}
// * softmax: fp32 online softmax vs exact: summation order and exp rounding, ~1e-7
//   relative; 1e-5 with margin. bf16: output rounding, 8e-3. fp64 (tiled): 1e-12.
double softmax_tolerance(at::ScalarType dt) {
  return dt == at::kDouble ? 1e-12 : dt == at::kFloat ? 1e-5 : 8e-3;
}

const std::vector<Op>& ops() {
  static const std::vector<Op> list = [] {
    std::vector<Op> o;
    const std::vector<at::ScalarType> all = {at::kDouble, at::kFloat, at::kBFloat16};
    auto pairwise = [](const Case&, const Inputs& in, const LayerKernels& lk) {
      return hd_pairwise(in.q, in.k, in.v, lk);
    };
    auto naive = [](const Case&, const Inputs& in, const LayerKernels&) {
      return softmax_attention_naive(in.q, in.k, in.v);
    };
    o.push_back({"oal.prefill", true, all, {},
                 [](const Case& c, const Inputs& in, const LayerKernels& lk) {
                   return hd_chunked(in.q, in.k, in.v, lk, {.chunk = c.chunk}).y;
                 },
                 pairwise, oal_tolerance});
    // A prefill that continues the state of an earlier one (the inter-chunk readout of
    // a state that did not start empty).
    o.push_back({"oal.prefill.continued", true, all, [](const Case& c) { return c.T >= 2; },
                 [](const Case& c, const Inputs& in, const LayerKernels& lk) {
                   const int64_t h = c.T / 2;
                   auto part = [&](int64_t t, int64_t n) {
                     return Inputs{in.q.narrow(2, t, n), in.k.narrow(2, t, n), in.v.narrow(2, t, n)};
                   };
                   const Inputs a = part(0, h), b = part(h, c.T - h);
                   const HdPrefill first = hd_chunked(a.q, a.k, a.v, lk, {.chunk = c.chunk});
                   const HdPrefill second = hd_chunked(b.q, b.k, b.v, lk, {.chunk = c.chunk}, &first.state);
                   return at::cat({first.y, second.y}, 2);
                 },
                 pairwise, oal_tolerance});
    // The state itself (what decoding continues from) against the ATen chunked path in
    // fp64, compared as [B, Hkv, Df, Dv + 1].
    // Per-token paths and the state comparison skip the 1000-token case: its fp64
    // reference decoders run token by token through ATen (slow), and the prefill ops
    // already cover long-sequence accumulation.
    const auto short_only = [](const Case& c) { return c.T <= 300; };
    o.push_back({"oal.state", true, all, short_only,
                 [](const Case& c, const Inputs& in, const LayerKernels& lk) {
                   return hd_chunked(in.q, in.k, in.v, lk, {.chunk = c.chunk}).state.S;
                 },
                 [](const Case& c, const Inputs& in, const LayerKernels& lk) {
                   return hd_chunked(in.q, in.k, in.v, lk, {.chunk = c.chunk, .backend = HdBackend::aten}).state.S;
                 },
                 oal_tolerance});
    o.push_back({"oal.decode", true, all, short_only,
                 [](const Case& c, const Inputs& in, const LayerKernels& lk) {
                   HdDecodeState st(lk, c.batch, {.chunk = c.chunk});
                   return decode_in_pieces(st, in);
                 },
                 pairwise, oal_tolerance});
    // Reference against reference: the token-by-token Eq. 5-6 evaluation (O(T d² dv) per
    // token, so small shapes only).
    o.push_back({"oal.recurrent", false, {at::kDouble},
                 [](const Case& c) { return c.d <= 16 && c.T <= 300; },
                 [](const Case&, const Inputs& in, const LayerKernels& lk) {
                   return hd_recurrent(in.q, in.k, in.v, lk);
                 },
                 pairwise, oal_tolerance});
    o.push_back({"softmax.forward", true, all, {},
                 [](const Case& c, const Inputs& in, const LayerKernels&) {
                   return SoftmaxAttention(c.chunk).forward(in.q, in.k, in.v);
                 },
                 naive, softmax_tolerance});
    o.push_back({"softmax.decode", true, all, short_only,
                 [](const Case& c, const Inputs& in, const LayerKernels&) {
                   auto st = SoftmaxAttention(c.chunk).new_state(c.batch);
                   return decode_in_pieces(*st, in);
                 },
                 naive, softmax_tolerance});
    // The f16 cache against the softmax of half-rounded keys and values: only summation
    // order differs, so the fp32 tolerance holds (a kernel reading the wrong half, a
    // wrong stride or an unwidened tail gives O(1) errors).
    o.push_back({"softmax.decode.f16_cache",
                 true,
                 {at::kFloat, at::kBFloat16},
                 short_only,
                 [](const Case& c, const Inputs& in, const LayerKernels&) {
                   auto st =
                       SoftmaxAttention(c.chunk, std::nullopt, KvCacheType::f16).new_state(c.batch);
                   return decode_in_pieces(*st, in);
                 },
                 naive_on_half_kv,
                 softmax_tolerance});
    // The q8_0 cache likewise (head dimensions that are multiples of 32 only): prefill
    // (33+ rows: key blocks decoded and transposed into scratch), single steps and a
    // final chunk, at the fp32 tolerance (a wrong row, block or scale is O(1)).
    o.push_back({"softmax.decode.q8_0_cache",
                 true,
                 {at::kFloat, at::kBFloat16},
                 [](const Case& c) { return c.d % 32 == 0 && c.dv % 32 == 0; },
                 [](const Case& c, const Inputs& in, const LayerKernels&) {
                   auto st =
                       SoftmaxAttention(c.chunk, std::nullopt, KvCacheType::q8_0).new_state(c.batch);
                   return decode_in_pieces(*st, in);
                 },
                 naive_on_q8_kv,
                 softmax_tolerance});
    o.push_back({"kernel.oal_prefill.segments", true, {at::kFloat}, {}, kernel_prefill_segments,
                 pairwise, oal_tolerance});
    o.push_back({"kernel.oal_decode.steps", true, {at::kFloat}, short_only, kernel_decode_steps,
                 pairwise, oal_tolerance});
    o.push_back({"kernel.flash_softmax.blocks", true, {at::kFloat}, {}, kernel_flash_blocks,
                 naive, softmax_tolerance});
    o.push_back({"kernel.flash_softmax.f16",
                 true,
                 {at::kFloat},
                 {},
                 kernel_flash_f16,
                 naive_on_half_kv,
                 softmax_tolerance});
    o.push_back({"softmax.tiled", false, {at::kDouble}, {},
                 [](const Case& c, const Inputs& in, const LayerKernels&) {
                   return softmax_attention_tiled(in.q, in.k, in.v, c.chunk);
                 },
                 naive, softmax_tolerance});
    return o;
  }();
  return list;
}

void check_op(const Op& op) {
  c10::NoGradGuard no_grad;
  uint64_t seed = 1;
  for (const Case& c : sweep()) {
    seed += 10;
    if (op.applies && !op.applies(c)) continue;
    const Inputs master = make_inputs(c, seed);
    const LayerKernels lk = LayerKernels::from(oal::test::random_kernels(c.hq, c.d, 3, seed + 5));
    for (at::ScalarType dt : op.dtypes) {
      const Inputs in = cast(master, dt);
      const at::Tensor ref = op.reference(c, cast(in, at::kDouble), lk);
      const bool on_kernels = op.kernel_backed && dt != at::kDouble;
      std::vector<simd::SimdTarget> targets = {simd::active_target()};
      if (on_kernels && c.every_target) targets = simd::available_targets();
      for (simd::SimdTarget t : targets) {
        const simd::ScopedTarget force(t);
        const at::Tensor y = op.fast(c, in, lk);
        const double err = rel_err(y, ref), tol = op.tolerance(dt);
        EXPECT_LT(err, tol) << op.name << " " << c10::toString(dt) << " target "
                            << simd::target_name(t) << " B " << c.batch << " Hq " << c.hq << " Hkv "
                            << c.hkv << " d " << c.d << " dv " << c.dv << " T " << c.T << " chunk "
                            << c.chunk;
        // Outputs come back in the input dtype (the OAL state accumulates in fp32 or wider).
        if (op.name != "oal.state") EXPECT_EQ(y.scalar_type(), dt) << op.name;
        else EXPECT_EQ(y.scalar_type(), dt == at::kDouble ? at::kDouble : at::kFloat);
      }
    }
  }
}

class OpConsistency : public testing::TestWithParam<size_t> {};

TEST_P(OpConsistency, FastPathMatchesReference) { check_op(ops()[GetParam()]); }

INSTANTIATE_TEST_SUITE_P(Ops, OpConsistency, testing::Range<size_t>(0, ops().size()),
                         [](const testing::TestParamInfo<size_t>& p) {
                           std::string n = ops()[p.param].name;
                           for (char& ch : n)
                             if (ch == '.') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace oal::attn
