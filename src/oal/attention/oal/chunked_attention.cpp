#include "oal/attention/oal/chunked_attention.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "oal/attention/oal/chunked_train.h"
#include "oal/attention/oal/feature_map.h"
#include "oal/attention/qkv_shape.h"
#include "oal/attention/simd_path.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"
#include "oal/simd/oal_prefill.h"

namespace oal::attn {

using namespace hd_detail;  // NOLINT: this module's own internal helpers

// ---- Chunked / decode ------------------------------------------------------------------

namespace {

// Every check of an extend call (inputs, kernels, state against the inputs).
AttentionDims check_extend(std::string_view op, const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v, const LayerKernels& lk, const HdState& state,
                           const HdOptions& options) {
  AttentionDims s =
      check_hd_inputs(op, q, k, v, lk, /*longer_keys=*/false, options.kernels_validated);
  check(options.chunk >= 1, op, "chunk must be >= 1, got {}", options.chunk);
  auto ct = compute_dtype(q.scalar_type());
  check_dim(state.S, 4, op, "state S [B, Hkv, Df, Dv+1]");
  check(state.S.size(0) == s.batch && state.S.size(1) == s.kv_heads &&
            state.S.size(2) == simd::oal_feature_dim(s.dim) && state.S.size(3) == s.value_dim + 1,
        op, "state S is {}, inputs need [{}, {}, {}, {}]", shape_str(state.S), s.batch,
        s.kv_heads, simd::oal_feature_dim(s.dim), s.value_dim + 1);
  check(state.S.scalar_type() == ct, op, "state dtype {} does not match compute dtype {}",
        c10::toString(state.S.scalar_type()), c10::toString(ct));
  check(state.S.device() == q.device(), op, "state and inputs on different devices");
  return s;
}

// The CPU kernels on fp32 copies of the inputs; state.S (fp32) is updated in place.
// A single token with a workspace runs the fused decode step, anything else the chunked
// prefill kernel (without its readout when `readout` is false: an undefined tensor is
// returned). y [B, Hq, T, Dv] in q's dtype.
// With `den` ([B, Hq, T] fp32, contiguous) the readout is left unnormalised: y holds the
// numerators (fp32) and `den` the denominators.
at::Tensor extend_simd(const AttentionDims& s, const at::Tensor& q, const at::Tensor& k,
                       const at::Tensor& v, const simd::OalPlan& plan, HdState& state,
                       int64_t chunk, simd::OalDecodeWorkspace* ws, bool readout,
                       float* den = nullptr) {
  if (!state.S.is_contiguous()) state.S = state.S.contiguous();
  auto qf = q.to(at::kFloat).contiguous(), kf = k.to(at::kFloat).contiguous();
  auto vf = v.to(at::kFloat).contiguous();
  at::Tensor y;
  if (readout) y = at::empty({s.batch, s.q_heads, s.q_len, s.value_dim}, qf.options());
  if (s.q_len == 1 && ws != nullptr && readout && den == nullptr) {
    simd::oal_decode_step_f32(plan, s.kv_heads, qf.data_ptr<float>(), kf.data_ptr<float>(),
                              vf.data_ptr<float>(), y.data_ptr<float>(), state.S.data_ptr<float>(),
                              *ws);
  } else {
    simd::OalPrefillOptions o;
    // A chunk longer than the call is one chunk of q_len: the same numbers, with scratch
    // sized for the tokens at hand (a one-token windowed step would size it for 64).
    o.chunk = std::min(chunk, s.q_len);
    o.denominators = den;
    simd::oal_prefill_f32(s, plan, qf.data_ptr<float>(), kf.data_ptr<float>(), vf.data_ptr<float>(),
                          readout ? y.data_ptr<float>() : nullptr, state.S.data_ptr<float>(), o);
  }
  state.tokens += s.q_len;
  return readout && den == nullptr ? y.to(q.scalar_type()) : y;
}

std::shared_ptr<const simd::OalPlan> plan_for(const LayerKernels& lk, const HdOptions& options) {
  if (options.plan_cache) return options.plan_cache->get(lk);
  return std::make_shared<const simd::OalPlan>(
      simd::OalPlan::build(lk.group_of, lk.L.detach(), lk.eps));
}

// The ATen evaluation (intra-chunk factored weights + state readout): the unnormalised
// sums ũ [B, Hkv, G, T, Dv+1] (numerators, then the denominator). Under autograd on the
// CPU, the linear-time training function (chunked_train.h); on other devices and with
// the ATen backend, autograd of the chunk loop (which keeps every chunk's features). S
// is then a new tensor, else it is updated in place.
at::Tensor extend_aten_sums(const AttentionDims& s, const at::Tensor& q,
                       const at::Tensor& k, const at::Tensor& v, const LayerKernels& lk,
                       HdState& state, const HdOptions& options) {
  const auto ct = compute_dtype(q.scalar_type());
  const bool recording = records_grad(q) || records_grad(k) || records_grad(v) ||
                         records_grad(lk.L) || records_grad(state.S);
  at::Tensor ut;
  if (recording && q.device().is_cpu() && options.backend != HdBackend::aten) {
    // The forward on the prefill kernel when it could run without autograd.
    std::shared_ptr<const simd::OalPlan> plan;
    if (ct == at::kFloat && state.S.scalar_type() == at::kFloat) plan = plan_for(lk, options);
    TrainSums out = chunked_sums_train(q.to(ct), k.to(ct), v.to(ct), lk, state.S,
                                       state.tokens == 0, options.chunk, plan.get());
    ut = out.ut;
    state.S = out.S;
  } else {
    ut = chunked_sums(q.to(ct), k.to(ct), with_ones(v.to(ct)), prepare(lk, ct, q.device()),
                      lk.eps, state.S, state.tokens == 0, options.chunk);
  }
  state.tokens += s.q_len;
  return ut;
}

}  // namespace

std::string hd_method_blocker(const LayerKernels& lk, const HdOptions& options) {
  if (options.backend == HdBackend::aten) return "the ATen backend was requested";
  if (records_grad(lk.L))
    return "autograd is recording through L (trainable kernels outside a NoGradGuard)";
  return "";
}

std::string hd_simd_blocker(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const LayerKernels& lk, const HdState& state,
                              const HdOptions& options) {
  std::string why = hd_method_blocker(lk, options);
  if (!why.empty()) return why;
  if (!state.S.defined()) return "the state is undefined";
  why = simd_blocker(q, k, v);
  if (!why.empty()) return why;
  if (!state.S.device().is_cpu()) return "the state is not on the CPU";
  if (state.S.scalar_type() != at::kFloat) return "the state is not fp32";
  if (records_grad(state.S))
    return "autograd is recording through the state (a state that requires grad)";
  return "";
}


at::Tensor hd_extend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const LayerKernels& lk, HdState& state, const HdOptions& options) {
  constexpr std::string_view op = "hd_chunked";
  AttentionDims s = check_extend(op, q, k, v, lk, state, options);
  if (s.q_len == 0) return at::zeros({s.batch, s.q_heads, 0, s.value_dim}, q.options());
  // Dispatch point: the fp32 CPU kernel whenever it can run, the ATen code otherwise.
  if (hd_simd_blocker(q, k, v, lk, state, options).empty())
    return extend_simd(s, q, k, v, *plan_for(lk, options), state, options.chunk, nullptr, true);
  return readout(op, extend_aten_sums(s, q, k, v, lk, state, options), s, q.scalar_type());
}

HdParts hd_extend_parts(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const LayerKernels& lk, HdState& state, const HdOptions& options) {
  constexpr std::string_view op = "hd_extend_parts";
  AttentionDims s = check_extend(op, q, k, v, lk, state, options);
  const auto ct = compute_dtype(q.scalar_type());
  if (s.q_len == 0)
    return {at::zeros({s.batch, s.q_heads, 0, s.value_dim}, q.options().dtype(ct)),
            at::zeros({s.batch, s.q_heads, 0}, q.options().dtype(ct))};
  if (hd_simd_blocker(q, k, v, lk, state, options).empty()) {
    at::Tensor den = at::empty({s.batch, s.q_heads, s.q_len}, q.options().dtype(at::kFloat));
    at::Tensor num = extend_simd(s, q, k, v, *plan_for(lk, options), state, options.chunk,
                                 nullptr, true, den.data_ptr<float>());
    return {num, den};
  }
  at::Tensor ut = extend_aten_sums(s, q, k, v, lk, state, options)
                      .reshape({s.batch, s.q_heads, s.q_len, s.value_dim + 1});
  at::Tensor den = ut.select(-1, s.value_dim);
  check_denominator(op, den, "the expanded state readout cancelled");
  return {ut.narrow(-1, 0, s.value_dim), den};
}

HdPrefill hd_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const LayerKernels& kernels, const HdOptions& options,
                     const HdState* initial) {
  constexpr std::string_view op = "hd_chunked";
  // Shapes for the state; hd_extend below checks everything again, scan included.
  AttentionDims s = check_qkv(op, q, k, v, /*allow_longer_keys=*/false, FiniteScan::skip);
  HdPrefill out;
  if (initial) {
    check(initial->S.defined(), op, "initial state is undefined");
    out.state.S = initial->S.clone();  // the caller's state stays untouched
    out.state.tokens = initial->tokens;
  } else {
    out.state = HdState::zeros(s.batch, s.kv_heads, s.dim, s.value_dim,
                               compute_dtype(q.scalar_type()), q.device());
  }
  out.y = hd_extend(q, k, v, kernels, out.state, options);
  return out;
}

at::Tensor hd_step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const LayerKernels& kernels, HdState& state, const HdOptions& options) {
  constexpr std::string_view op = "hd_step";
  check_dim(q, 3, op, "q [B, Hq, D]");
  check_dim(k, 3, op, "k [B, Hkv, D]");
  check_dim(v, 3, op, "v [B, Hkv, Dv]");
  return hd_extend(q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2), kernels, state, options)
      .squeeze(2);
}

// ---- HdDecodeState -------------------------------------------------------------------

HdDecodeState::HdDecodeState(LayerKernels kernels, int64_t batch, HdOptions options)
    : kernels_(std::move(kernels)), batch_(batch), options_(std::move(options)) {
  check(batch >= 1, "hd_decode", "batch must be >= 1, got {}", batch);
  kernels_.validate("hd_decode");
  if (!options_.plan_cache) options_.plan_cache = std::make_shared<OalPlanCache>();
}

HdDecodeState::HdDecodeState(LayerKernels kernels, HdState state, HdOptions options)
    : kernels_(std::move(kernels)), batch_(state.batch()), options_(std::move(options)),
      state_(std::move(state)) {
  kernels_.validate("hd_decode", state_->dim());
  state_->S = state_->S.clone();  // extend() updates in place; the caller's state stays
  if (!options_.plan_cache) options_.plan_cache = std::make_shared<OalPlanCache>();
}

AttentionDims HdDecodeState::check_tokens(const at::Tensor& q, const at::Tensor& k,
                                          const at::Tensor& v) {
  constexpr std::string_view op = "hd_decode";
  const AttentionDims s = check_qkv(op, q, k, v, /*allow_longer_keys=*/false);
  check(s.batch == batch_, op, "state was made for batch {}, got q {}", batch_, shape_str(q));
  check(kernels_.heads() == s.q_heads && kernels_.group_of.size(1) == s.dim, op,
        "kernels are for Hq = {}, d = {}; q is {}", kernels_.heads(),
        kernels_.group_of.size(1), shape_str(q));
  if (!state_)
    state_ = HdState::zeros(s.batch, s.kv_heads, s.dim, s.value_dim,
                            compute_dtype(q.scalar_type()), q.device());
  check(state_->S.size(1) == s.kv_heads && state_->S.size(3) == s.value_dim + 1, op,
        "state S is {}, tokens have Hkv = {}, Dv = {}", shape_str(state_->S), s.kv_heads,
        s.value_dim);
  return s;
}

at::Tensor HdDecodeState::run_simd(const AttentionDims& s, const at::Tensor& q,
                                     const at::Tensor& k, const at::Tensor& v, bool readout) {
  if (s.q_len == 1 && !ws_)
    ws_ = std::make_unique<simd::OalDecodeWorkspace>(s.batch, s.kv_heads, s.group_size(), s.dim,
                                                     s.value_dim);
  return extend_simd(s, q, k, v, *options_.plan_cache->get(kernels_), *state_, options_.chunk,
                       ws_.get(), readout);
}

at::Tensor HdDecodeState::extend(const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v) {
  const AttentionDims s = check_tokens(q, k, v);
  if (s.q_len > 0 && hd_simd_blocker(q, k, v, kernels_, *state_, options_).empty())
    return run_simd(s, q, k, v, /*readout=*/true);
  return hd_extend(q, k, v, kernels_, *state_, options_);
}

void HdDecodeState::absorb(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const AttentionDims s = check_tokens(q, k, v);
  if (s.q_len > 0 && hd_simd_blocker(q, k, v, kernels_, *state_, options_).empty())
    run_simd(s, q, k, v, /*readout=*/false);
  else
    hd_extend(q, k, v, kernels_, *state_, options_);
}

StateSnapshot HdDecodeState::snapshot() const {
  StateSnapshot s{.tokens = tokens()};
  if (state_ && state_->tokens > 0) s.add("S", state_->S);
  return s;
}

void HdDecodeState::restore(const StateSnapshot& s) {
  constexpr std::string_view op = "hd_decode";
  check_restorable(op, s, tokens(), {"S"});
  if (s.tokens == 0) return;  // an empty state is created at the first tokens
  const at::Tensor& S = *s.find(op, "S", 4);
  const int64_t d = kernels_.group_of.size(1);
  check(S.size(0) == batch_ && S.size(1) >= 1 && kernels_.heads() % S.size(1) == 0 &&
            S.size(2) == 1 + d + d * (d + 1) / 2 && S.size(3) >= 2 &&
            (S.scalar_type() == at::kFloat || S.scalar_type() == at::kDouble),
        op, "restore: S must be [{}, Hkv | {}, {}, Dv + 1] fp32 or fp64 for d = {}; got {} {}",
        batch_, kernels_.heads(), 1 + d + d * (d + 1) / 2, d, shape_str(S),
        c10::toString(S.scalar_type()));
  state_ = HdState{S.clone(), s.tokens};
}

}  // namespace oal::attn
