#include "oal/attention/fast_paths.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "oal/attention/qkv_shape.h"
#include "oal/attention/softmax.h"
#include "oal/core/error.h"

namespace oal::attn {
namespace {

namespace kc = oal::kernels::cpu;

at::Tensor as_f32(const at::Tensor& t) { return t.to(at::kFloat).contiguous(); }

bool records_grad(const at::Tensor& t) { return at::GradMode::is_enabled() && t.requires_grad(); }

}  // namespace

std::string fast_kernel_blocker(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  if (!q.device().is_cpu()) return "inputs are not on the CPU";
  const auto dt = q.scalar_type();
  if (dt != at::kFloat && dt != at::kBFloat16)
    return std::string("dtype ") + c10::toString(dt) + " (kernels take fp32 or bf16)";
  if (records_grad(q) || records_grad(k) || records_grad(v))
    return "autograd is recording through q, k or v";
  return "";
}

FastResult softmax_attention_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  std::optional<double> scale,
                                  const kernels::cpu::FlashOptions& options) {
  FastResult r;
  r.notice = fast_kernel_blocker(q, k, v);
  if (!r.notice.empty()) {
    r.notice = "softmax: reference path (" + r.notice + ")";
    r.y = softmax_attention_tiled(q, k, v, 128, scale);
    return r;
  }
  const QkvShape s = check_qkv("softmax_attention_fast", q, k, v, true);
  check(options.q_block >= 1 && options.k_block >= 1, "softmax_attention_fast",
        "block sizes must be >= 1");
  const at::Tensor qf = as_f32(q), kf = as_f32(k), vf = as_f32(v);
  at::Tensor y = at::empty({s.batch, s.q_heads, s.q_len, s.value_dim}, qf.options());
  const double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(s.dim)));
  kc::flash_softmax_f32(kernel_dims(s), qf.data_ptr<float>(), kf.data_ptr<float>(),
                        vf.data_ptr<float>(), y.data_ptr<float>(), static_cast<float>(sc),
                        options);
  r.y = y.to(q.scalar_type());
  return r;
}

FastResult oal_prefill_fast(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const LayerKernels& kernels, int64_t chunk, HdState* state,
                            const kernels::cpu::OalPlan* plan,
                            const kernels::cpu::OalPrefillOptions& options) {
  constexpr const char* op = "oal_prefill_fast";
  FastResult r;
  r.notice = fast_kernel_blocker(q, k, v);
  if (r.notice.empty() && records_grad(kernels.L)) r.notice = "autograd is recording through L";
  if (r.notice.empty() && state != nullptr &&
      (state->S.scalar_type() != at::kFloat || !state->S.device().is_cpu() ||
       records_grad(state->S)))
    r.notice = "the state is not a plain fp32 CPU tensor";
  if (!r.notice.empty()) {
    r.notice = "oal: reference path (" + r.notice + ")";
    HdOptions ho;
    ho.chunk = chunk;
    ho.backend = HdBackend::aten;
    HdPrefill p = hd_chunked(q, k, v, kernels, ho, state);
    if (state != nullptr) *state = p.state;
    r.y = p.y;
    return r;
  }
  const QkvShape s = check_qkv(op, q, k, v, false);
  kernels.validate(op, s.dim);
  check(kernels.heads() == s.q_heads, op, "kernels have {} heads, q has {}", kernels.heads(),
        s.q_heads);
  check(chunk >= 1, op, "chunk: expected >= 1, got {}", chunk);
  std::optional<kc::OalPlan> own;
  if (plan == nullptr) own = kc::OalPlan::build(kernels.group_of, kernels.L, kernels.eps);
  const kc::OalPlan& pl = plan != nullptr ? *plan : *own;
  float* sp = nullptr;
  if (state != nullptr) {
    check(state->S.dim() == 4 && state->S.size(0) == s.batch && state->S.size(1) == s.kv_heads &&
              state->S.size(2) == hd_feature_dim(s.dim) && state->S.size(3) == s.value_dim + 1,
          op, "state [B, Hkv, Df, Dv+1] does not match the inputs");
    if (!state->S.is_contiguous()) state->S = state->S.contiguous();
    sp = state->S.data_ptr<float>();
  }
  const at::Tensor qf = as_f32(q), kf = as_f32(k), vf = as_f32(v);
  at::Tensor y = at::empty({s.batch, s.q_heads, s.q_len, s.value_dim}, qf.options());
  kc::OalPrefillOptions o = options;
  o.chunk = chunk;
  kc::oal_prefill_f32(kernel_dims(s), pl, qf.data_ptr<float>(), kf.data_ptr<float>(),
                      vf.data_ptr<float>(), y.data_ptr<float>(), sp, o);
  if (state != nullptr) state->tokens += s.q_len;
  r.y = y.to(q.scalar_type());
  return r;
}

// ---- OalFastDecodeState ------------------------------------------------------------

OalFastDecodeState::OalFastDecodeState(LayerKernels kernels, int64_t batch, int64_t chunk)
    : kernels_(std::move(kernels)),
      plan_(kc::OalPlan::build(kernels_.group_of, kernels_.L, kernels_.eps)),
      batch_(batch),
      chunk_(chunk) {
  check(batch >= 1 && chunk >= 1, "oal_fast_decode", "batch and chunk must be >= 1");
}

void OalFastDecodeState::ensure_state(int64_t kv_heads, int64_t dim, int64_t value_dim) {
  if (!state_) {
    state_ = HdState::zeros(batch_, kv_heads, dim, value_dim, at::kFloat);
    ws_ = std::make_unique<kc::OalDecodeWorkspace>(batch_, kv_heads, plan_.q_heads / kv_heads,
                                                   dim, value_dim);
  }
  check(state_->S.size(1) == kv_heads && state_->dim() == dim &&
            state_->value_dim() == value_dim,
        "oal_fast_decode", "tokens with Hkv={} D={} Dv={} do not match the state", kv_heads,
        dim, value_dim);
}

at::Tensor OalFastDecodeState::extend(const at::Tensor& q, const at::Tensor& k,
                                      const at::Tensor& v) {
  const QkvShape s = check_qkv("oal_fast_decode", q, k, v, false);
  check(s.batch == batch_, "oal_fast_decode", "batch {}: the state was made for {}", s.batch,
        batch_);
  ensure_state(s.kv_heads, s.dim, s.value_dim);
  notice_ = fast_kernel_blocker(q, k, v);
  if (!notice_.empty()) {
    notice_ = "oal decode: reference path (" + notice_ + ")";
    HdOptions ho;
    ho.chunk = chunk_;
    ho.backend = HdBackend::aten;
    return hd_extend(q, k, v, kernels_, *state_, ho);
  }
  if (s.q_len == 1) {
    at::Tensor y = at::empty({s.batch, s.q_heads, s.value_dim}, q.options().dtype(at::kFloat));
    step_into(as_f32(q.squeeze(2)), as_f32(k.squeeze(2)), as_f32(v.squeeze(2)), y);
    return y.unsqueeze(2).to(q.scalar_type());
  }
  return oal_prefill_fast(q, k, v, kernels_, chunk_, &*state_, &plan_).y;
}

void OalFastDecodeState::absorb(const at::Tensor& k, const at::Tensor& v) {
  constexpr const char* op = "oal_fast_decode";
  check(k.dim() == 4 && v.dim() == 4 && k.size(0) == batch_ && v.size(0) == batch_ &&
            k.size(1) == v.size(1) && k.size(2) == v.size(2) && k.size(1) > 0 &&
            plan_.q_heads % k.size(1) == 0 && k.size(3) == plan_.dim,
        op, "absorb: expected k [B, Hkv, T, D], v [B, Hkv, T, Dv] matching the kernels");
  const std::string blocker = fast_kernel_blocker(k, k, v);
  check(blocker.empty(), op, "absorb: the CPU kernels cannot take these tensors ({})", blocker);
  ensure_state(k.size(1), k.size(3), v.size(3));
  kc::AttentionDims d;
  d.batch = batch_;
  d.q_heads = plan_.q_heads;
  d.kv_heads = k.size(1);
  d.q_len = d.k_len = k.size(2);
  d.dim = k.size(3);
  d.value_dim = v.size(3);
  const at::Tensor kf = as_f32(k), vf = as_f32(v);
  kc::OalPrefillOptions o;
  o.chunk = chunk_;
  kc::oal_prefill_f32(d, plan_, nullptr, kf.data_ptr<float>(), vf.data_ptr<float>(), nullptr,
                      state_->S.data_ptr<float>(), o);
  state_->tokens += d.q_len;
}

void OalFastDecodeState::step_into(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   at::Tensor& y) {
  constexpr const char* op = "oal_fast_decode";
  check(q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && y.dim() == 3, op,
        "step_into: expected q [B, Hq, D], k [B, Hkv, D], v [B, Hkv, Dv], y [B, Hq, Dv]");
  for (const at::Tensor* t : {&q, &k, &v, static_cast<const at::Tensor*>(&y)})
    check(t->scalar_type() == at::kFloat && t->is_contiguous() && t->device().is_cpu(), op,
          "step_into: expected contiguous fp32 CPU tensors");
  check(q.size(0) == batch_ && q.size(1) == plan_.q_heads && q.size(2) == plan_.dim &&
            k.size(0) == batch_ && k.size(2) == plan_.dim && v.size(0) == batch_ &&
            v.size(1) == k.size(1) && y.size(0) == batch_ && y.size(1) == plan_.q_heads &&
            y.size(2) == v.size(2) && k.size(1) > 0 && plan_.q_heads % k.size(1) == 0,
        op, "step_into: shapes do not match the kernels (Hq={}, D={})", plan_.q_heads,
        plan_.dim);
  ensure_state(k.size(1), k.size(2), v.size(2));
  kc::oal_decode_step_f32(plan_, k.size(1), q.data_ptr<float>(), k.data_ptr<float>(),
                          v.data_ptr<float>(), y.data_ptr<float>(),
                          state_->S.data_ptr<float>(), *ws_);
  state_->tokens += 1;
}

}  // namespace oal::attn
