#include "oal/attention/windowed/windowed_attention.h"

#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "oal/attention/kernel_train.h"
#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/qkv_shape.h"
#include "oal/attention/simd_path.h"
#include "oal/attention/windowed/exact_sums.h"
#include "oal/core/error.h"
#include "oal/core/fnv1a.h"
#include "oal/core/tensor_checks.h"
#include "oal/simd/window_exact.h"

namespace oal::attn {
namespace {

constexpr std::string_view k_method_op = "windowed_attention";
constexpr std::string_view k_state_op = "windowed_decode";

at::Tensor rows(const at::Tensor& t, int64_t start, int64_t length) {
  return t.narrow(2, start, length);
}


// (α·a + β·n) / (α·z + β·r) with α = exp(m - c - ref), β = exp(g - ref) and ref the
// larger log-magnitude of the two denominators (no gradient: it cancels). Rows without
// exact keys have m = -inf (α = 0), rows without linear keys r = 0 (β = 0); validation
// ensures no row has neither. a [B, Hq, T, Dv], m, z, r [B, Hq, T], n like a; c [Hq];
// g: the log-factor the linear sums were divided by (a feature prefix's key shift,
// broadcastable to [B, Hq, T]), undefined for none.
at::Tensor combine(const at::Tensor& m, const at::Tensor& a, const at::Tensor& z,
                   const at::Tensor& n, const at::Tensor& r, const at::Tensor& c,
                   const at::Tensor& g = {}) {
  const at::Tensor has_exact = at::isfinite(m), has_linear = r > 0;
  // g carries gradient: a shift computed from the keys (Performer's max) does not cancel
  // here as it does in a plain feature map's normalisation.
  const at::Tensor shift =
      g.defined() ? g.to(m.scalar_type()).expand_as(m) : at::zeros_like(m);
  // m only shifts a and z (their scale cancels against α), so it carries no gradient.
  const at::Tensor lam = at::where(has_exact, m, at::zeros_like(m)).detach() - c.view({1, -1, 1});
  at::Tensor ref;
  {
    at::NoGradGuard g;
    const double ninf = -std::numeric_limits<double>::infinity();
    at::Tensor le = at::where(has_exact, lam + z.clamp_min(1e-30).log(), at::full_like(lam, ninf));
    at::Tensor lr =
        at::where(has_linear, shift + r.clamp_min(1e-30).log(), at::full_like(lam, ninf));
    ref = at::maximum(le, lr);
  }
  const at::Tensor alpha = at::where(has_exact, (lam - ref).exp(), at::zeros_like(lam));
  const at::Tensor beta = at::where(has_linear, (shift - ref).exp(), at::zeros_like(lam));
  const at::Tensor den = alpha * z + beta * r;
  check_denominator(k_method_op, den, "the window and the kernel both gave no weight");
  return (alpha.unsqueeze(-1) * a + beta.unsqueeze(-1) * n) / den.unsqueeze(-1);
}

// The base's query heads (0 without a base).
int64_t base_q_heads(const QuadraticAttention* quadratic, const FeatureMapMethod* features) {
  if (quadratic) return quadratic->kernels().heads();
  return features ? features->q_heads() : 0;
}

}  // namespace

at::Tensor windowed_log_kappa(const FeatureMapMethod& method, const at::Tensor& q,
                              const at::Tensor& k, const std::vector<int64_t>& positions) {
  const auto dt = method.feature_dtype(q.scalar_type());
  const FeatureMaps f = method.features(q.to(dt), k.to(dt));
  const at::Tensor rows = f.q.index_select(2, at::tensor(positions, at::kLong));
  at::Tensor log_kappa =
      at::matmul(rows, expand_kv_heads(f.k, q.size(1)).transpose(-1, -2)).log();
  if (f.k_log_shift.defined())  // [B, Hf] -> [B, Hq, 1, 1]
    log_kappa = log_kappa + expand_kv_heads(f.k_log_shift.unsqueeze(-1).unsqueeze(-1), q.size(1));
  return log_kappa;
}

// ---- WindowedAttention ------------------------------------------------------------------

WindowedAttention::WindowedAttention(std::shared_ptr<const AttentionMethod> base,
                                     Window window, at::Tensor log_scale, bool trainable)
    : base_(std::move(base)), window_(window), trainable_(trainable) {
  window_.validate(k_method_op);
  quadratic_ = dynamic_cast<const QuadraticAttention*>(base_.get());
  feature_map_ = dynamic_cast<const FeatureMapMethod*>(base_.get());
  check(!base_ || quadratic_ || feature_map_, k_method_op,
        "method '{}' cannot be the kernel beside a window: expected a quadratic kernel (oal, "
        "global) or a feature-map baseline", base_ ? base_->name() : "");
  check(base_ != nullptr || window_.recent >= 1, k_method_op,
        "the windowed-only method needs a window of at least 1 token (got {})",
        window_.describe());
  check(log_scale.defined() && log_scale.dim() == 1 && log_scale.numel() >= 1, k_method_op,
        "log_scale: expected [Hq], got {}", shape_str(log_scale));
  check(!base_ || base_q_heads(quadratic_, feature_map_) == log_scale.numel(), k_method_op,
        "log_scale has {} values, the base method {} query heads", log_scale.numel(),
        base_q_heads(quadratic_, feature_map_));
  check(at::isfinite(log_scale).all().item<bool>(), k_method_op, "log_scale is not finite");
  check(log_scale.is_floating_point(), k_method_op, "log_scale: expected a floating tensor");
  // Trainable: an own leaf. Otherwise the caller's tensor, so a graph through it (the
  // Python op's log_scale) reaches the caller.
  log_scale_ = trainable_ ? log_scale.detach().clone().set_requires_grad(true) : log_scale;
}

std::string WindowedAttention::name() const { return base_ ? base_->name() : "window"; }

at::Tensor WindowedAttention::forward(const at::Tensor& q, const at::Tensor& k,
                                      const at::Tensor& v) const {
  check_dim(q, 4, k_method_op, "q [B, Hq, T, D]");
  // Training on the CPU: the blocked kernel that recomputes its weights in the backward
  // (O(N) memory) instead of the ATen graph of the decode path below. (Not for a
  // feature-map base: it has no such kernel.) From HdOptions::chunked_train_from tokens a
  // quadratic base trains through the decode path, whose kernel part is then the
  // linear-time chunked form (chunked_train.h); windowed-only is linear in the pairwise
  // kernel already (it reads the sinks and the band only).
  const LayerKernels* kernels = quadratic_ ? &quadratic_->kernels() : nullptr;
  const bool pairwise =
      !quadratic_ || (quadratic_->options().backend != HdBackend::aten &&
                      q.size(2) < quadratic_->options().chunked_train_from);
  at::Tensor y;
  if (!feature_map_ && pairwise && kernel_train_ready(q, k, v, kernels, log_scale_)) {
    y = kernel_attention_train(q, k, v, kernels, log_scale_, window_);
  } else {
    WindowedDecodeState state(*this, q.size(0));
    y = state.extend(q, k, v);
  }
  return attend_full_heads(full_heads_, y, q, k, v);
}

std::unique_ptr<DecodeState> WindowedAttention::new_state(int64_t batch) const {
  auto windowed = std::make_unique<WindowedDecodeState>(*this, batch);
  if (full_heads_.none()) return windowed;
  return std::make_unique<FullHeadsDecodeState>(std::move(windowed), full_heads_, batch);
}

void WindowedAttention::set_full_heads(FullHeads heads) {
  heads.validate(k_method_op);
  full_heads_ = std::move(heads);
}

std::string WindowedAttention::method_blocker() const {
  if (feature_map_) return "the kernel is a feature-map baseline's (ATen only)";
  if (records_grad(log_scale_)) return "autograd is recording through c_h";
  if (quadratic_ && records_grad(quadratic_->kernels().L)) return "autograd is recording through L";
  return "";
}

PathChoice WindowedAttention::cpu_path() const {
  std::string detail = fmt::format("{} sinks and {} recent keys exact, ", window_.sinks,
                                   window_.recent);
  if (!base_) detail += "nothing beyond (windowed-only)";
  else if (!quadratic_) detail += base_->name() + " beyond";
  else if (quadratic_->options().backend == HdBackend::aten) detail += "HD state beyond (ATen)";
  else detail += "HD state beyond";
  if (!full_heads_.none()) detail += "; KV heads " + full_heads_.describe() + " exact softmax";
  return path_choice(std::move(detail), method_blocker());
}

std::string WindowedAttention::fingerprint() const {
  const auto c = log_scale_.detach().to(at::kCPU, at::kDouble).contiguous();
  uint64_t h = k_fnv1a_offset;  // over c_h's fp64 bytes
  fnv1a(h, c.data_ptr<double>(), static_cast<size_t>(c.numel()) * sizeof(double));
  const std::string full =
      full_heads_.none() ? std::string() : fmt::format(",full={}", full_heads_.describe());
  return fmt::format("{}+window({},c={:016x}{})", base_ ? base_->fingerprint() : name(),
                     window_.describe(), h, full);
}

void WindowedAttention::load_log_scale(const at::Tensor& c) {
  check(c.defined() && c.numel() == log_scale_.numel(), k_method_op,
        "log_scale: expected {} values, got {}", log_scale_.numel(),
        c.defined() ? shape_str(c) : std::string("none"));
  check(at::isfinite(c).all().item<bool>(), k_method_op, "log_scale is not finite");
  at::NoGradGuard g;
  log_scale_.copy_(c.reshape(log_scale_.sizes()));
}

std::vector<at::Tensor> WindowedAttention::parameters() const {
  if (!trainable_) return {};
  std::vector<at::Tensor> out = base_ ? base_->parameters() : std::vector<at::Tensor>{};
  out.push_back(log_scale_);
  return out;
}

// ---- WindowedDecodeState ----------------------------------------------------------------

WindowedDecodeState::WindowedDecodeState(const WindowedAttention& method, int64_t batch)
    : method_(method), batch_(batch) {
  check(batch >= 1, k_state_op, "batch must be >= 1, got {}", batch);
}

at::Tensor WindowedDecodeState::extend(const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v) {
  const AttentionDims s = check_qkv(k_state_op, q, k, v, /*allow_longer_keys=*/false);
  check(s.batch == batch_, k_state_op, "state was made for batch {}, got q {}", batch_,
        shape_str(q));
  if (const FeatureMapMethod* fm = method_.feature_map())
    check(s.kv_heads == fm->kv_heads() && s.dim == fm->head_dim(), k_state_op,
          "{} was built for {} KV heads, head dim {}; got k {}", fm->name(), fm->kv_heads(),
          fm->head_dim(), shape_str(k));
  check(!method_.base() || s.q_heads == method_.q_heads(), k_state_op,
        "the method has {} query heads, q is {}", method_.q_heads(), shape_str(q));
  const auto ct = compute_dtype(q.scalar_type());
  if (!sink_k_.defined()) {
    auto opt = q.options().dtype(ct);
    sink_k_ = at::zeros({s.batch, s.kv_heads, 0, s.dim}, opt);
    sink_v_ = at::zeros({s.batch, s.kv_heads, 0, s.value_dim}, opt);
    ring_k_ = sink_k_.clone();
    ring_v_ = sink_v_.clone();
  }
  check(sink_k_.size(1) == s.kv_heads && sink_k_.size(3) == s.dim &&
            sink_v_.size(3) == s.value_dim && sink_k_.scalar_type() == ct,
        k_state_op, "state holds Hkv = {}, D = {}, Dv = {} ({}); got k {}, v {} ({})",
        sink_k_.size(1), sink_k_.size(3), sink_v_.size(3), c10::toString(sink_k_.scalar_type()),
        shape_str(k), shape_str(v), c10::toString(q.scalar_type()));
  const int64_t T = s.q_len;
  if (T == 0) return at::zeros({s.batch, s.q_heads, 0, s.value_dim}, q.options());
  if (step_blocker(s, q, k, v).empty()) return step_simd(s, q, k, v);
  if (ring_head_ != 0) {  // the CPU steps' circular ring back in position order
    ring_k_ = ring_in_order(ring_k_);
    ring_v_ = ring_in_order(ring_v_);
    ring_head_ = 0;
  }
  const Window& w = method_.window();
  const int64_t p0 = tokens_;
  const at::Tensor qc = q.to(ct), kc = k.to(ct), vc = v.to(ct);
  const int64_t new_sinks = std::clamp<int64_t>(w.sinks - p0, 0, T);

  // The exact part's keys: the sinks, the ring and the new tokens, in position order.
  const at::Tensor all_k =
      at::cat({sink_k_, rows(kc, 0, new_sinks), ring_k_, rows(kc, new_sinks, T - new_sinks)}, 2);
  const at::Tensor all_v =
      at::cat({sink_v_, rows(vc, 0, new_sinks), ring_v_, rows(vc, new_sinks, T - new_sinks)}, 2);
  const int64_t sinks_held = sink_k_.size(2) + new_sinks;

  // Linear part: keys not yet in the HD state (the ring, then the new non-sink tokens)
  // enter it W positions late. Queries before position S + W see no linear key.
  at::Tensor pend_k = at::cat({ring_k_, rows(kc, new_sinks, T - new_sinks)}, 2);
  at::Tensor pend_v = at::cat({ring_v_, rows(vc, new_sinks, T - new_sinks)}, 2);
  const int64_t delay = std::max<int64_t>(w.sinks + w.recent - p0, 0);  // first query with R
  at::Tensor num = at::zeros({s.batch, s.q_heads, T, s.value_dim}, qc.options());
  at::Tensor den = at::zeros({s.batch, s.q_heads, T}, qc.options());
  at::Tensor linear_shift;  // a feature prefix's key log-shift, [B, Hq, 1]
  const int64_t absorbed = method_.base() ? std::max<int64_t>(T - delay, 0) : 0;
  HdParts parts;
  if (method_.feature_map())  // also when nothing is absorbed: new keys' features join the ring
    parts = feature_sums(qc, kc, new_sinks, pend_v, delay, absorbed, linear_shift);
  else if (absorbed > 0)
    parts = quadratic_sums(rows(qc, delay, absorbed), rows(pend_k, 0, absorbed),
                           rows(pend_v, 0, absorbed));
  if (absorbed > 0) {
    num = at::cat({rows(num, 0, delay), parts.num.to(ct)}, 2);
    den = at::cat({den.narrow(2, 0, delay), parts.den.to(ct)}, 2);
  }
  const int64_t keep = method_.base() ? pend_k.size(2) - absorbed
                                      : std::min(w.recent, pend_k.size(2));
  ring_k_ = rows(pend_k, pend_k.size(2) - keep, keep);
  ring_v_ = rows(pend_v, pend_v.size(2) - keep, keep);
  sink_k_ = at::cat({sink_k_, rows(kc, 0, new_sinks)}, 2);
  sink_v_ = at::cat({sink_v_, rows(vc, 0, new_sinks)}, 2);
  if (!c10::GradMode::is_enabled()) {  // a decoder keeps only its own rows
    ring_k_ = ring_k_.contiguous();
    ring_v_ = ring_v_.contiguous();
    if (ring_phi_.defined()) ring_phi_ = ring_phi_.contiguous();
  }
  // Without a linear part c_h cancels: zeros serve every head.
  const at::Tensor c =
      method_.base() ? method_.log_scale().to(ct) : at::zeros({s.q_heads}, qc.options());
  at::Tensor y;
  if (exact_blocker(q, k, v).empty()) {  // the CPU kernel: exact part and combination
    y = at::empty({s.batch, s.q_heads, T, s.value_dim}, qc.options());
    const at::Tensor ak = all_k.contiguous(), av = all_v.contiguous(), cc = c.contiguous();
    const at::Tensor sums =
        method_.base() ? at::cat({num, den.unsqueeze(-1)}, -1).contiguous() : at::Tensor();
    const int64_t nk = ak.size(2);
    simd::window_exact_f32(
        {s.batch, s.q_heads, s.kv_heads, s.dim, s.value_dim, T, p0, w.sinks, w.recent},
        qc.contiguous().data_ptr<float>(),
        {ak.data_ptr<float>(), av.data_ptr<float>(), nk, sinks_held, 0},
        {ak.data_ptr<float>() + sinks_held * s.dim, av.data_ptr<float>() + sinks_held * s.value_dim,
         nk, nk - sinks_held, p0 + T - (nk - sinks_held)},
        sums.defined() ? sums.data_ptr<float>() : nullptr, cc.data_ptr<float>(),
        y.data_ptr<float>());
  } else {
    const ExactSums ex = exact_sums(qc, all_k, all_v, p0, sinks_held, w);
    y = combine(ex.m, ex.a, ex.z, num, den, c, linear_shift);
  }
  tokens_ += T;
  return y.to(q.scalar_type());
}

HdParts WindowedDecodeState::quadratic_sums(const at::Tensor& q, const at::Tensor& k,
                                            const at::Tensor& v) {
  const QuadraticAttention& base = *method_.quadratic();
  if (!hd_)
    hd_ = HdState::zeros(q.size(0), k.size(1), q.size(3), v.size(3), q.scalar_type(), q.device());
  return hd_extend_parts(q, k, v, base.kernels(), *hd_, base.options());
}

HdParts WindowedDecodeState::feature_sums(const at::Tensor& q, const at::Tensor& k,
                                          int64_t new_sinks, const at::Tensor& pend_v,
                                          int64_t delay, int64_t absorbed, at::Tensor& shift) {
  const FeatureMapMethod& fm = *method_.feature_map();
  const auto dt = fm.feature_dtype(q.scalar_type());
  const int64_t T = q.size(2);
  // Every key's features with the query at its own position (SpectraFormer's coefficient
  // reads both), computed once, when the token arrives.
  const FeatureMaps f = fm.features(q.to(dt), k.to(dt));
  at::Tensor fresh = rows(f.k, new_sinks, T - new_sinks);
  at::Tensor ring = ring_phi_.defined()
                        ? ring_phi_
                        : at::zeros({f.k.size(0), f.k.size(1), 0, f.k.size(3)}, f.k.options());
  FeaturePrefix next = prefix_;  // handles: replaced below, never written in place
  if (f.k_log_shift.defined()) {  // the prefix, the ring and the new keys at one shift
    if (next.log_shift.defined()) {
      const at::Tensor c = at::maximum(next.log_shift, f.k_log_shift);
      const at::Tensor old = (next.log_shift - c).exp().unsqueeze(-1);  // [B, Hf, 1]
      if (!next.empty()) {
        next.S = next.S * old.unsqueeze(-1);
        next.z = next.z * old;
      }
      ring = ring * old.unsqueeze(-1);
      fresh = fresh * (f.k_log_shift - c).exp().unsqueeze(-1).unsqueeze(-1);
      next.log_shift = c;
    } else {
      next.log_shift = f.k_log_shift;
    }
  }
  const at::Tensor pending = at::cat({ring, fresh}, 2);
  HdParts out;
  if (absorbed > 0) {
    FeatureSums sums =
        feature_sums_chunked(rows(f.q, delay, absorbed), rows(pending, 0, absorbed),
                             rows(pend_v, 0, absorbed).to(dt), fm.chunk(), &next);
    next = std::move(sums.after);
    out = {sums.num, sums.den};
    // [B, Hf] -> [B, Hq, 1]: the key-feature heads' shift for their query heads.
    shift = expand_kv_heads(next.log_shift.unsqueeze(-1).unsqueeze(-1), q.size(1)).squeeze(-1);
  }
  ring_phi_ = rows(pending, absorbed, pending.size(2) - absorbed);
  prefix_ = std::move(next);
  return out;
}

std::string WindowedDecodeState::exact_blocker(const at::Tensor& q, const at::Tensor& k,
                                               const at::Tensor& v) const {
  if (sink_k_.scalar_type() != at::kFloat) return "the rows are not fp32";
  std::string why = simd_blocker(q, k, v);
  if (!why.empty()) return why;
  return method_.method_blocker();
}

std::string WindowedDecodeState::step_blocker(const AttentionDims& s, const at::Tensor& q,
                                              const at::Tensor& k, const at::Tensor& v) const {
  const Window& w = method_.window();
  if (s.q_len != 1) return "more than one token";
  if (w.recent < 1 || tokens_ < w.sinks + w.recent) return "the window is not full yet";
  std::string why = exact_blocker(q, k, v);
  if (!why.empty()) return why;
  if (const QuadraticAttention* base = method_.quadratic()) {
    if (base->options().backend == HdBackend::aten) return "the ATen backend was requested";
  }
  return "";
}

at::Tensor WindowedDecodeState::step_simd(const AttentionDims& s, const at::Tensor& q,
                                          const at::Tensor& k, const at::Tensor& v) {
  const Window& w = method_.window();
  const int64_t B = s.batch, Hkv = s.kv_heads, D = s.dim, Dv = s.value_dim, W = w.recent;
  for (at::Tensor* t : {&sink_k_, &sink_v_, &ring_k_, &ring_v_})
    if (!t->is_contiguous()) *t = t->contiguous();
  const at::Tensor qf = q.to(at::kFloat).contiguous(), kf = k.to(at::kFloat).contiguous(),
                   vf = v.to(at::kFloat).contiguous();
  float* rk = ring_k_.data_ptr<float>();
  float* rv = ring_v_.data_ptr<float>();
  at::Tensor sums;
  // The oldest ring row enters the HD state.
  if (const QuadraticAttention* base = method_.quadratic()) {
    if (!hd_) hd_ = HdState::zeros(B, Hkv, D, Dv, at::kFloat, q.device());
    if (!ws_) ws_ = std::make_unique<simd::OalDecodeWorkspace>(B, Hkv, s.group_size(), D, Dv);
    leaving_.resize(static_cast<size_t>(B * Hkv * (D + Dv)));
    float* k_out = leaving_.data();
    float* v_out = k_out + B * Hkv * D;
    for (int64_t u = 0; u < B * Hkv; ++u) {
      std::memcpy(k_out + u * D, rk + (u * W + ring_head_) * D, sizeof(float) * D);
      std::memcpy(v_out + u * Dv, rv + (u * W + ring_head_) * Dv, sizeof(float) * Dv);
    }
    sums = at::empty({B, s.q_heads, Dv + 1}, qf.options());
    simd::oal_decode_step_f32(*base->options().plan_cache->get(base->kernels()), Hkv,
                              qf.data_ptr<float>(), k_out, v_out, nullptr,
                              hd_->S.data_ptr<float>(), *ws_, 0, sums.data_ptr<float>());
    hd_->tokens += 1;
  }
  // The new token takes the oldest row's place in the circular ring.
  for (int64_t u = 0; u < B * Hkv; ++u) {
    std::memcpy(rk + (u * W + ring_head_) * D, kf.data_ptr<float>() + u * D, sizeof(float) * D);
    std::memcpy(rv + (u * W + ring_head_) * Dv, vf.data_ptr<float>() + u * Dv,
                sizeof(float) * Dv);
  }
  ring_head_ = (ring_head_ + 1) % W;
  at::Tensor y = at::empty({B, s.q_heads, 1, Dv}, qf.options());
  const at::Tensor c = method_.base() ? method_.log_scale().to(at::kFloat).contiguous()
                                      : at::zeros({s.q_heads}, qf.options());
  const int64_t ns = sink_k_.size(2);
  simd::window_exact_step_f32(
      {B, s.q_heads, Hkv, D, Dv, 1, tokens_, w.sinks, W}, qf.data_ptr<float>(),
      {sink_k_.data_ptr<float>(), sink_v_.data_ptr<float>(), ns, ns, 0},
      {rk, rv, W, W, tokens_ - W + 1}, sums.defined() ? sums.data_ptr<float>() : nullptr,
      c.data_ptr<float>(), y.data_ptr<float>());
  tokens_ += 1;
  return y.to(q.scalar_type());
}

at::Tensor WindowedDecodeState::ring_in_order(const at::Tensor& ring) const {
  return ring_head_ == 0 ? ring : at::roll(ring, -ring_head_, 2).contiguous();
}

int64_t WindowedDecodeState::state_bytes() const {
  int64_t b = hd_ ? hd_->bytes() : 0;
  for (const at::Tensor* t : {&sink_k_, &sink_v_, &ring_k_, &ring_v_, &ring_phi_, &prefix_.S,
                              &prefix_.z, &prefix_.log_shift})
    if (t->defined()) b += t->numel() * int64_t(t->element_size());
  return b;
}

StateSnapshot WindowedDecodeState::snapshot() const {
  StateSnapshot out{.tokens = tokens_};
  if (tokens_ == 0) return out;
  out.add("sink_k", sink_k_);
  out.add("sink_v", sink_v_);
  out.add("ring_k", ring_in_order(ring_k_));
  out.add("ring_v", ring_in_order(ring_v_));
  if (hd_) out.add("S", hd_->S);
  if (ring_phi_.defined() && ring_phi_.size(2) > 0) out.add("ring_phi", ring_phi_);
  if (!prefix_.empty()) {
    out.add("S", prefix_.S);
    out.add("z", prefix_.z);
  }
  if (prefix_.log_shift.defined()) out.add("log_shift", prefix_.log_shift);
  return out;
}

void WindowedDecodeState::restore(const StateSnapshot& snap) {
  check_restorable(k_state_op, snap, tokens_,
                   {"sink_k", "sink_v", "ring_k", "ring_v", "S", "z", "log_shift", "ring_phi"});
  if (snap.tokens == 0) return;
  const Window& w = method_.window();
  const int64_t sinks = std::min(w.sinks, snap.tokens), rest = snap.tokens - sinks;
  const int64_t ring = std::min(w.recent, rest), in_state = rest - ring;
  const at::Tensor& sk = *snap.find(k_state_op, "sink_k", 4);
  const at::Tensor& sv = *snap.find(k_state_op, "sink_v", 4);
  const at::Tensor& rk = *snap.find(k_state_op, "ring_k", 4);
  const at::Tensor& rv = *snap.find(k_state_op, "ring_v", 4);
  const at::Tensor* S = snap.find(k_state_op, "S", 4, /*required=*/false);
  const bool float_t = sk.is_floating_point() && sk.scalar_type() != at::kHalf &&
                       sk.scalar_type() != at::kBFloat16;
  const int64_t Hkv = sk.size(1), D = sk.size(3), Dv = sv.size(3);
  check(float_t && sv.scalar_type() == sk.scalar_type() && rk.scalar_type() == sk.scalar_type() &&
            rv.scalar_type() == sk.scalar_type(),
        k_state_op, "restore: sink and ring rows must share one fp32 or fp64 dtype");
  // (Without a base the layer has no head count of its own: any Hkv.)
  check(sk.size(0) == batch_ && Hkv >= 1 && (!method_.base() || method_.q_heads() % Hkv == 0) &&
            D >= 1 && Dv >= 1 && sk.size(2) == sinks &&
            sv.sizes() == at::IntArrayRef({batch_, Hkv, sinks, Dv}) &&
            rk.sizes() == at::IntArrayRef({batch_, Hkv, ring, D}) &&
            rv.sizes() == at::IntArrayRef({batch_, Hkv, ring, Dv}),
        k_state_op,
        "restore: after {} tokens with {} expected sinks [{}, Hkv, {}, D|Dv] and a ring "
        "[{}, Hkv, {}, D|Dv]; got sink_k {}, sink_v {}, ring_k {}, ring_v {}",
        snap.tokens, w.describe(), batch_, sinks, batch_, ring, shape_str(sk), shape_str(sv),
        shape_str(rk), shape_str(rv));
  check(!method_.quadratic() || D == method_.quadratic()->kernels().dim(), k_state_op,
        "restore: rows of head dim {}, the layer's kernels have d = {}", D,
        method_.quadratic() ? method_.quadratic()->kernels().dim() : 0);
  const bool want_state = method_.base() && in_state > 0;
  // The linear state, checked before anything changes (a failed restore leaves the state).
  FeatureState features;
  std::optional<HdState> hd;
  check(want_state == (S != nullptr), k_state_op,
        "restore: {} tokens with {} {} a linear state \"S\"", snap.tokens, w.describe(),
        want_state ? "need" : "leave no room for");
  if (method_.feature_map()) {
    check(D == method_.feature_map()->head_dim() && Hkv == method_.feature_map()->kv_heads(),
          k_state_op, "restore: rows of {} KV heads, head dim {}; the layer has {} and {}", Hkv,
          D, method_.feature_map()->kv_heads(), method_.feature_map()->head_dim());
    features = checked_features(snap, ring, Dv);
  } else if (S) {
    check(S->scalar_type() == sk.scalar_type() &&
              S->sizes() == at::IntArrayRef({batch_, Hkv, 1 + D + D * (D + 1) / 2, Dv + 1}),
          k_state_op, "restore: S must be [{}, {}, {}, {}] {}, got {}", batch_, Hkv,
          1 + D + D * (D + 1) / 2, Dv + 1, c10::toString(sk.scalar_type()), shape_str(*S));
    check(at::isfinite(*S).all().item<bool>(), k_state_op, "restore: S is not finite");
    hd = HdState{S->clone(), in_state};
  }
  for (const at::Tensor* t : {&sk, &sv, &rk, &rv})
    check(at::isfinite(*t).all().item<bool>(), k_state_op,
          "restore: a sink or ring row is not finite");
  sink_k_ = sk.clone();
  sink_v_ = sv.clone();
  ring_k_ = rk.clone();
  ring_v_ = rv.clone();
  ring_head_ = 0;
  prefix_ = std::move(features.prefix);
  ring_phi_ = std::move(features.ring_phi);
  hd_ = std::move(hd);
  tokens_ = snap.tokens;
}

WindowedDecodeState::FeatureState WindowedDecodeState::checked_features(
    const StateSnapshot& snap, int64_t ring, int64_t value_dim) const {
  const FeatureMapMethod& fm = *method_.feature_map();
  const at::Tensor* S = snap.find(k_state_op, "S", 4, /*required=*/false);
  const at::Tensor* z = snap.find(k_state_op, "z", 3, /*required=*/false);
  const at::Tensor* g = snap.find(k_state_op, "log_shift", 2, /*required=*/false);
  const at::Tensor* phi = snap.find(k_state_op, "ring_phi", 4, /*required=*/false);
  // The feature sizes the method gives (heads Hf, features F, a key shift or not): one
  // probe token.
  FeatureMaps probe;
  {
    at::NoGradGuard no_grad;
    const auto opt = at::TensorOptions().dtype(fm.feature_dtype(at::kFloat));
    probe = fm.features(at::zeros({1, fm.q_heads(), 1, fm.head_dim()}, opt),
                        at::zeros({1, fm.kv_heads(), 1, fm.head_dim()}, opt));
  }
  const int64_t Hf = probe.k.size(1), F = probe.k.size(3);
  const auto dt = probe.k.scalar_type();
  auto fits = [&](const at::Tensor* t, at::IntArrayRef shape) {
    return t && t->scalar_type() == dt && t->sizes() == shape;
  };
  const bool shifted = probe.k_log_shift.defined();
  check((ring > 0) == (phi != nullptr) && (S != nullptr) == (z != nullptr) &&
            (!phi || fits(phi, {batch_, Hf, ring, F})) &&
            (!S || (fits(S, {batch_, Hf, F, value_dim}) && fits(z, {batch_, Hf, F}))) &&
            (!g || fits(g, {batch_, Hf})) && (!shifted || !(S || phi) || g),
        k_state_op,
        "restore: {}'s state after a ring of {} rows must be ring_phi [{}, {}, {}, {}] (when the "
        "ring holds rows), S [{}, {}, {}, {}] with z [{}, {}, {}] (when keys left the ring) and "
        "log_shift [{}, {}] ({}), all {}",
        fm.name(), ring, batch_, Hf, ring, F, batch_, Hf, F, value_dim, batch_, Hf, F, batch_, Hf,
        shifted ? "with either" : "optional", c10::toString(dt));
  for (const at::Tensor* t : {S, z, g, phi})
    check(!t || at::isfinite(*t).all().item<bool>(), k_state_op,
          "restore: the feature state is not finite");
  FeatureState out;
  if (S) out.prefix = {S->clone(), z->clone(), g ? g->clone() : at::zeros({batch_, Hf}, S->options())};
  else if (g) out.prefix.log_shift = g->clone();
  if (phi) out.ring_phi = phi->clone();
  return out;
}

}  // namespace oal::attn
