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

// Positions [from, to) as an int64 tensor.
at::Tensor span(int64_t from, int64_t to) {
  return at::arange(from, std::max(from, to), at::TensorOptions().dtype(at::kLong));
}

// (α·a + β·n) / (α·z + β·r) with α = exp(m - c - ref), β = exp(-ref) and ref the larger
// log-magnitude of the two denominators (no gradient: it cancels). Rows without exact
// keys have m = -inf (α = 0), rows without linear keys r = 0 (β = 0); validation ensures
// no row has neither. a [B, Hq, T, Dv], m, z, r [B, Hq, T], n like a; c [Hq].
at::Tensor combine(const at::Tensor& m, const at::Tensor& a, const at::Tensor& z,
                   const at::Tensor& n, const at::Tensor& r, const at::Tensor& c) {
  const at::Tensor has_exact = at::isfinite(m), has_linear = r > 0;
  // m only shifts a and z (their scale cancels against α), so it carries no gradient.
  const at::Tensor lam = at::where(has_exact, m, at::zeros_like(m)).detach() - c.view({1, -1, 1});
  at::Tensor ref;
  {
    at::NoGradGuard g;
    const double ninf = -std::numeric_limits<double>::infinity();
    at::Tensor le = at::where(has_exact, lam + z.clamp_min(1e-30).log(), at::full_like(lam, ninf));
    at::Tensor lr = at::where(has_linear, r.clamp_min(1e-30).log(), at::full_like(lam, ninf));
    ref = at::maximum(le, lr);
  }
  const at::Tensor alpha = at::where(has_exact, (lam - ref).exp(), at::zeros_like(lam));
  const at::Tensor beta = at::where(has_linear, (-ref).exp(), at::zeros_like(lam));
  const at::Tensor den = alpha * z + beta * r;
  check_denominator(k_method_op, den, "the window and the kernel both gave no weight");
  return (alpha.unsqueeze(-1) * a + beta.unsqueeze(-1) * n) / den.unsqueeze(-1);
}

}  // namespace

// ---- WindowedAttention ------------------------------------------------------------------

WindowedAttention::WindowedAttention(std::shared_ptr<const QuadraticAttention> base,
                                     Window window, at::Tensor log_scale, bool trainable)
    : base_(std::move(base)), window_(window), trainable_(trainable) {
  window_.validate(k_method_op);
  check(base_ != nullptr || window_.recent >= 1, k_method_op,
        "the windowed-only method needs a window of at least 1 token (got {})",
        window_.describe());
  check(log_scale.defined() && log_scale.dim() == 1 && log_scale.numel() >= 1, k_method_op,
        "log_scale: expected [Hq], got {}", shape_str(log_scale));
  check(!base_ || base_->kernels().heads() == log_scale.numel(), k_method_op,
        "log_scale has {} values, the base method {} query heads", log_scale.numel(),
        base_ ? base_->kernels().heads() : 0);
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
  // (O(N) memory) instead of the ATen graph of the decode path below.
  const LayerKernels* kernels = base_ ? &base_->kernels() : nullptr;
  if (kernel_train_ready(q, k, v, kernels, log_scale_) &&
      (!base_ || base_->options().backend != HdBackend::aten))
    return kernel_attention_train(q, k, v, kernels, log_scale_, window_);
  WindowedDecodeState state(*this, q.size(0));
  return state.extend(q, k, v);
}

std::unique_ptr<DecodeState> WindowedAttention::new_state(int64_t batch) const {
  return std::make_unique<WindowedDecodeState>(*this, batch);
}

std::string WindowedAttention::fingerprint() const {
  const auto c = log_scale_.detach().to(at::kCPU, at::kDouble).contiguous();
  uint64_t h = k_fnv1a_offset;  // over c_h's fp64 bytes
  fnv1a(h, c.data_ptr<double>(), static_cast<size_t>(c.numel()) * sizeof(double));
  return fmt::format("{}+window({},c={:016x})", base_ ? base_->fingerprint() : name(),
                     window_.describe(), h);
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

WindowedDecodeState::ExactSums WindowedDecodeState::exact_part(const at::Tensor& q,
                                                                const at::Tensor& all_k,
                                                                const at::Tensor& all_v,
                                                                int64_t sinks_held) const {
  const Window& w = method_.window();
  const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t Hkv = all_k.size(1), G = Hq / Hkv, Dv = all_v.size(3);
  const int64_t p0 = tokens_;
  // Keys after the sinks have consecutive positions from first_pos (ring, then new).
  const int64_t first_pos = p0 + T - (all_k.size(2) - sinks_held);
  const double inv = 1.0 / std::sqrt(double(D));
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<at::Tensor> ms, as, zs;
  for (int64_t c0 = 0; c0 < T; c0 += k_exact_chunk) {
    const int64_t n = std::min(k_exact_chunk, T - c0), qa = p0 + c0, qb = qa + n;
    const int64_t lo = std::max({w.sinks, qa - w.recent + 1, first_pos}), hi = qb;
    std::vector<at::Tensor> kk{rows(all_k, 0, sinks_held)}, vv{rows(all_v, 0, sinks_held)};
    std::vector<at::Tensor> kp{span(0, sinks_held)};
    if (lo < hi) {
      kk.push_back(rows(all_k, sinks_held + lo - first_pos, hi - lo));
      vv.push_back(rows(all_v, sinks_held + lo - first_pos, hi - lo));
      kp.push_back(span(lo, hi));
    }
    const at::Tensor keys = at::cat(kk, 2), vals = at::cat(vv, 2), kpos = at::cat(kp);
    const int64_t nk = keys.size(2);
    const at::Tensor qc = rows(q, c0, n).reshape({B, Hkv, G, n, D});
    at::Tensor s = at::matmul(qc, keys.unsqueeze(2).transpose(-1, -2)) * inv;  // [B,Hkv,G,n,nk]
    const at::Tensor mask = exact_mask(span(qa, qb), kpos, w).to(q.device());
    s = s.masked_fill(mask.logical_not(), ninf).reshape({B, Hq, n, nk});
    at::Tensor m = nk > 0 ? std::get<0>(s.max(-1)) : at::full({B, Hq, n}, ninf, s.options());
    const at::Tensor m_safe = at::where(at::isfinite(m), m, at::zeros_like(m)).detach();
    const at::Tensor p = (s - m_safe.unsqueeze(-1)).exp();  // exp(-inf) = 0 off E
    zs.push_back(p.sum(-1));
    as.push_back(at::matmul(p.reshape({B, Hkv, G * n, nk}), vals).reshape({B, Hq, n, Dv}));
    ms.push_back(m);
  }
  return {at::cat(ms, 2), at::cat(as, 2), at::cat(zs, 2)};
}

at::Tensor WindowedDecodeState::extend(const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v) {
  const AttentionDims s = check_qkv(k_state_op, q, k, v, /*allow_longer_keys=*/false);
  check(s.batch == batch_, k_state_op, "state was made for batch {}, got q {}", batch_,
        shape_str(q));
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
  int64_t absorbed = 0;
  if (method_.base() && T > delay) {
    const auto& base = *method_.base();
    absorbed = T - delay;
    if (!hd_) hd_ = HdState::zeros(s.batch, s.kv_heads, s.dim, s.value_dim, ct, q.device());
    HdParts parts = hd_extend_parts(rows(qc, delay, absorbed), rows(pend_k, 0, absorbed),
                                    rows(pend_v, 0, absorbed), base.kernels(), *hd_,
                                    base.options());
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
    const ExactSums ex = exact_part(qc, all_k, all_v, sinks_held);
    y = combine(ex.m, ex.a, ex.z, num, den, c);
  }
  tokens_ += T;
  return y.to(q.scalar_type());
}

std::string WindowedDecodeState::exact_blocker(const at::Tensor& q, const at::Tensor& k,
                                               const at::Tensor& v) const {
  if (sink_k_.scalar_type() != at::kFloat) return "the rows are not fp32";
  std::string why = simd_blocker(q, k, v);
  if (!why.empty()) return why;
  if (records_grad(method_.log_scale())) return "autograd is recording through c_h";
  if (const auto& base = method_.base())
    if (records_grad(base->kernels().L)) return "autograd is recording through L";
  return "";
}

std::string WindowedDecodeState::step_blocker(const AttentionDims& s, const at::Tensor& q,
                                              const at::Tensor& k, const at::Tensor& v) const {
  const Window& w = method_.window();
  if (s.q_len != 1) return "more than one token";
  if (w.recent < 1 || tokens_ < w.sinks + w.recent) return "the window is not full yet";
  std::string why = exact_blocker(q, k, v);
  if (!why.empty()) return why;
  if (const auto& base = method_.base()) {
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
  at::Tensor sums;
  if (const auto& base = method_.base()) {  // the row leaving the ring enters the state
    if (!hd_) hd_ = HdState::zeros(B, Hkv, D, Dv, at::kFloat, q.device());
    if (!ws_) ws_ = std::make_unique<simd::OalDecodeWorkspace>(B, Hkv, s.group_size(), D, Dv);
    const at::Tensor k_out = ring_k_.select(2, 0).contiguous(),
                     v_out = ring_v_.select(2, 0).contiguous();
    sums = at::empty({B, s.q_heads, Dv + 1}, qf.options());
    simd::oal_decode_step_f32(*base->options().plan_cache->get(base->kernels()), Hkv,
                              qf.data_ptr<float>(), k_out.data_ptr<float>(),
                              v_out.data_ptr<float>(), nullptr, hd_->S.data_ptr<float>(), *ws_,
                              0, sums.data_ptr<float>());
    hd_->tokens += 1;
  }
  // Shift the ring by one row in place (W rows per unit) and append the new token.
  for (auto [ring, row, width] : {std::tuple{&ring_k_, &kf, D}, std::tuple{&ring_v_, &vf, Dv}}) {
    float* r = ring->data_ptr<float>();
    const float* x = row->data_ptr<float>();
    for (int64_t u = 0; u < B * Hkv; ++u) {
      float* ru = r + u * W * width;
      std::memmove(ru, ru + width, sizeof(float) * (W - 1) * width);
      std::memcpy(ru + (W - 1) * width, x + u * width, sizeof(float) * width);
    }
  }
  at::Tensor y = at::empty({B, s.q_heads, 1, Dv}, qf.options());
  const at::Tensor c = method_.base() ? method_.log_scale().to(at::kFloat).contiguous()
                                      : at::zeros({s.q_heads}, qf.options());
  const int64_t ns = sink_k_.size(2);
  simd::window_exact_f32(
      {B, s.q_heads, Hkv, D, Dv, 1, tokens_, w.sinks, W}, qf.data_ptr<float>(),
      {sink_k_.data_ptr<float>(), sink_v_.data_ptr<float>(), ns, ns, 0},
      {ring_k_.data_ptr<float>(), ring_v_.data_ptr<float>(), W, W, tokens_ - W + 1},
      sums.defined() ? sums.data_ptr<float>() : nullptr, c.data_ptr<float>(), y.data_ptr<float>());
  tokens_ += 1;
  return y.to(q.scalar_type());
}

int64_t WindowedDecodeState::state_bytes() const {
  int64_t b = hd_ ? hd_->bytes() : 0;
  for (const at::Tensor* t : {&sink_k_, &sink_v_, &ring_k_, &ring_v_})
    if (t->defined()) b += t->numel() * int64_t(t->element_size());
  return b;
}

StateSnapshot WindowedDecodeState::snapshot() const {
  StateSnapshot out{.tokens = tokens_};
  if (tokens_ == 0) return out;
  out.add("sink_k", sink_k_);
  out.add("sink_v", sink_v_);
  out.add("ring_k", ring_k_);
  out.add("ring_v", ring_v_);
  if (hd_) out.add("S", hd_->S);
  return out;
}

void WindowedDecodeState::restore(const StateSnapshot& snap) {
  check_restorable(k_state_op, snap, tokens_, {"sink_k", "sink_v", "ring_k", "ring_v", "S"});
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
  check(!method_.base() || D == method_.base()->kernels().dim(), k_state_op,
        "restore: rows of head dim {}, the layer's kernels have d = {}", D,
        method_.base() ? method_.base()->kernels().dim() : 0);
  const bool want_state = method_.base() && in_state > 0;
  check(want_state == (S != nullptr), k_state_op,
        "restore: {} tokens with {} {} an HD state \"S\"", snap.tokens, w.describe(),
        want_state ? "need" : "leave no room for");
  if (S) {
    check(S->scalar_type() == sk.scalar_type() &&
              S->sizes() == at::IntArrayRef({batch_, Hkv, 1 + D + D * (D + 1) / 2, Dv + 1}),
          k_state_op, "restore: S must be [{}, {}, {}, {}] {}, got {}", batch_, Hkv,
          1 + D + D * (D + 1) / 2, Dv + 1, c10::toString(sk.scalar_type()), shape_str(*S));
    check(at::isfinite(*S).all().item<bool>(), k_state_op, "restore: S is not finite");
    hd_ = HdState{S->clone(), in_state};
  }
  for (const at::Tensor* t : {&sk, &sv, &rk, &rv})
    check(at::isfinite(*t).all().item<bool>(), k_state_op,
          "restore: a sink or ring row is not finite");
  sink_k_ = sk.clone();
  sink_v_ = sv.clone();
  ring_k_ = rk.clone();
  ring_v_ = rv.clone();
  tokens_ = snap.tokens;
}

}  // namespace oal::attn
