#include "oal/attention/baselines/feature_method.h"

#include <fmt/format.h>

#include "oal/attention/qkv_shape.h"
#include "oal/core/error.h"
#include "oal/core/fnv1a.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {

FeatureMapMethod::FeatureMapMethod(int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                                   int64_t chunk)
    : q_heads_(q_heads), kv_heads_(kv_heads), head_dim_(head_dim), chunk_(chunk) {
  check(q_heads > 0 && kv_heads > 0 && q_heads % kv_heads == 0, "feature_method",
        "query heads {} must be a positive multiple of KV heads {}", q_heads, kv_heads);
  check(head_dim > 0 && chunk > 0, "feature_method", "head dim {} and chunk {} must be > 0",
        head_dim, chunk);
}

at::ScalarType FeatureMapMethod::feature_dtype(at::ScalarType input) const {
  return compute_dtype(input);
}

void FeatureMapMethod::check_inputs(std::string_view op, const at::Tensor& q,
                                    const at::Tensor& k, const at::Tensor& v) const {
  AttentionDims s = check_qkv(op, q, k, v, false);
  check(s.q_heads == q_heads_ && s.kv_heads == kv_heads_ && s.dim == head_dim_, op,
        "{} was built for {} query heads, {} KV heads, head dim {}; got q {}, k {}", name(),
        q_heads_, kv_heads_, head_dim_, shape_str(q), shape_str(k));
}

at::Tensor FeatureMapMethod::take(const TensorMap& tensors, const std::string& name,
                                  at::IntArrayRef shape, std::string_view method,
                                  at::ScalarType dtype) {
  auto it = tensors.find(name);
  check(it != tensors.end(), method, "parameter '{}' missing", name);
  check(it->second.sizes() == shape, method, "parameter '{}': expected shape {}, got {}", name,
        fmt::format("{}", fmt::join(shape, ", ")), shape_str(it->second));
  at::Tensor t = it->second.to(dtype).contiguous().clone();
  if (at::isFloatingType(t.scalar_type()))
    check(at::isfinite(t).all().item<bool>(), method, "parameter '{}' is not finite", name);
  return t;
}

at::Tensor FeatureMapMethod::forward(const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v) const {
  check_inputs(name(), q, k, v);
  const auto dt = feature_dtype(q.scalar_type());
  FeatureMaps f = features(q.to(dt), k.to(dt));
  return feature_attention_chunked(f.q, f.k, v.to(dt), chunk_).to(q.scalar_type());
}

at::Tensor FeatureMapMethod::forward_at(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v,
                                        const std::vector<int64_t>& positions,
                                        AtPath path) const {
  check_inputs(name(), q, k, v);
  const auto dt = feature_dtype(q.scalar_type());
  FeatureMaps f = features(q.to(dt), k.to(dt));
  at::Tensor idx = at::tensor(positions, at::kLong);
  for (int64_t p : positions)
    check(p >= 0 && p < q.size(2), name(), "position {} outside [0, {})", p, q.size(2));
  return feature_attention_at(f.q.index_select(2, idx), f.k, v.to(dt), positions, path);
}

at::Tensor FeatureMapMethod::log_kernel(const at::Tensor& q, const at::Tensor& k,
                                        const std::vector<int64_t>& positions) const {
  const auto dt = feature_dtype(q.scalar_type());
  FeatureMaps f = features(q.to(dt), k.to(dt));
  at::Tensor fq = f.q;
  if (!positions.empty()) fq = fq.index_select(2, at::tensor(positions, at::kLong));
  at::Tensor fk = expand_kv_heads(f.k, q_heads_);
  return at::log(at::matmul(fq, fk.transpose(-1, -2)));
}

at::Tensor FeatureMapMethod::forward_pairwise(const at::Tensor& q, const at::Tensor& k,
                                              const at::Tensor& v) const {
  check_inputs(name(), q, k, v);
  return log_kernel_attention(log_kernel(q, k), v).to(q.scalar_type());
}

std::string FeatureMapMethod::fingerprint() const {
  uint64_t h = k_fnv1a_offset;
  for (const auto& [name, t] : state_dict()) {
    fnv1a(h, name);
    const at::Tensor c = t.detach().to(at::kCPU).to(at::kDouble).contiguous();
    fnv1a(h, c.data_ptr<double>(), static_cast<size_t>(c.numel()) * sizeof(double));
  }
  return fmt::format("{}:{:016x}", name(), h);
}

std::unique_ptr<DecodeState> FeatureMapMethod::new_state(int64_t batch) const {
  return std::make_unique<FeatureDecodeState>(*this, batch);
}

FeatureDecodeState::FeatureDecodeState(const FeatureMapMethod& method, int64_t batch)
    : method_(method), batch_(batch) {
  check(batch > 0, "feature_decode", "batch must be > 0, got {}", batch);
}

at::Tensor FeatureDecodeState::extend(const at::Tensor& q, const at::Tensor& k,
                                      const at::Tensor& v) {
  const std::string op = method_.name() + " decode";
  AttentionDims s = check_qkv(op, q, k, v, false);
  check(s.batch == batch_ && s.q_heads == method_.q_heads() &&
            s.kv_heads == method_.kv_heads() && s.dim == method_.head_dim(),
        op, "state for batch {}, {} query / {} KV heads, head dim {}; got q {}, k {}", batch_,
        method_.q_heads(), method_.kv_heads(), method_.head_dim(), shape_str(q), shape_str(k));
  if (!prefix_.empty())
    check(prefix_.S.size(3) == s.value_dim, op, "value dim changed from {} to {}",
          prefix_.S.size(3), s.value_dim);
  const auto dt = method_.feature_dtype(q.scalar_type());
  at::NoGradGuard no_grad;  // decoding never trains
  FeatureMaps f = method_.features(q.to(dt), k.to(dt));
  at::Tensor fk = f.k;
  if (f.k_log_shift.defined()) fk = align_key_shift(prefix_, fk, f.k_log_shift);
  at::Tensor y = feature_attention_chunked(f.q, fk, v.to(dt), method_.chunk(), &prefix_);
  tokens_ += s.q_len;
  return y.to(q.scalar_type());
}

int64_t FeatureDecodeState::state_bytes() const {
  if (prefix_.empty()) return 0;
  int64_t n = prefix_.S.numel() * prefix_.S.element_size() +
              prefix_.z.numel() * prefix_.z.element_size();
  if (prefix_.log_shift.defined())
    n += prefix_.log_shift.numel() * prefix_.log_shift.element_size();
  return n;
}

StateSnapshot FeatureDecodeState::snapshot() const {
  StateSnapshot s{.tokens = tokens_};
  if (prefix_.empty()) return s;
  s.add("S", prefix_.S);
  s.add("z", prefix_.z);
  if (prefix_.log_shift.defined()) s.add("log_shift", prefix_.log_shift);
  return s;
}

void FeatureDecodeState::restore(const StateSnapshot& s) {
  const std::string op = method_.name() + " decode";
  check_restorable(op, s, tokens_, {"S", "z", "log_shift"});
  if (s.tokens == 0) return;
  const at::Tensor& S = *s.find(op, "S", 4);
  const at::Tensor& z = *s.find(op, "z", 3);
  const at::Tensor* shift = s.find(op, "log_shift", 2, /*required=*/false);
  check(S.size(0) == batch_ && S.sizes().slice(0, 3) == z.sizes() &&
            (method_.kv_heads() == S.size(1) || method_.q_heads() == S.size(1)),
        op, "restore: S {} and z {} do not fit batch {} with {} query / {} KV heads", shape_str(S),
        shape_str(z), batch_, method_.q_heads(), method_.kv_heads());
  prefix_.S = S.clone();
  prefix_.z = z.clone();
  if (shift) prefix_.log_shift = shift->clone();
  tokens_ = s.tokens;
}

}  // namespace oal::attn
