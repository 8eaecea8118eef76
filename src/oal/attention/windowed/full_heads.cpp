#include "oal/attention/windowed/full_heads.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::attn {
namespace {

constexpr std::string_view k_op = "full_heads";
constexpr std::string_view k_state_op = "full_heads_state";

}  // namespace

void FullHeads::validate(std::string_view op, int64_t kv_heads) const {
  for (size_t i = 0; i < kv.size(); ++i) {
    check(kv[i] >= 0, op, "kept KV head {} does not exist (heads count from 0)", kv[i]);
    check(kv_heads <= 0 || kv[i] < kv_heads, op,
          "kept KV head {} does not exist (the layer has {} KV heads)", kv[i], kv_heads);
    check(i == 0 || kv[i] > kv[i - 1], op,
          "kept KV heads must be ascending without repeats, got {}", describe());
  }
}

std::string FullHeads::describe() const { return fmt::format("{}", fmt::join(kv, ",")); }

at::Tensor full_query_heads(const FullHeads& heads, int64_t q_heads, int64_t kv_heads) {
  check(kv_heads >= 1 && q_heads % kv_heads == 0, k_op,
        "{} query heads do not group over {} KV heads", q_heads, kv_heads);
  heads.validate(k_op, kv_heads);
  const int64_t g = q_heads / kv_heads;
  std::vector<int64_t> out;
  for (int64_t h : heads.kv)
    for (int64_t j = 0; j < g; ++j) out.push_back(h * g + j);
  return at::tensor(out, at::kLong);
}

namespace {

// The kept heads' q, k, v and the indices of their query heads; `op` names the caller.
struct KeptParts {
  at::Tensor q, k, v, q_heads;
};
// `qi`/`ki`: the query and KV head indices, built on the first call (the shapes are known
// only then) and reused while they fit, so a decode step does not rebuild them.
KeptParts kept_parts(std::string_view op, const FullHeads& heads, const at::Tensor& q,
                     const at::Tensor& k, const at::Tensor& v, at::Tensor& qi, at::Tensor& ki) {
  check_dim(q, 4, op, "q [B, Hq, T, D]");
  check_dim(k, 4, op, "k [B, Hkv, T, D]");
  check_dim(v, 4, op, "v [B, Hkv, T, Dv]");
  const int64_t g = q.size(1) / std::max<int64_t>(k.size(1), 1);
  if (!qi.defined() || qi.numel() != int64_t(heads.kv.size()) * g || qi.device() != q.device()) {
    qi = full_query_heads(heads, q.size(1), k.size(1)).to(q.device());
    ki = at::tensor(heads.kv, at::kLong).to(k.device());
  }
  heads.validate(op, k.size(1));  // the cached indices must still name existing heads
  return {q.index_select(1, qi), k.index_select(1, ki), v.index_select(1, ki), qi};
}

}  // namespace

at::Tensor attend_full_heads(const FullHeads& heads, const at::Tensor& y, const at::Tensor& q,
                             const at::Tensor& k, const at::Tensor& v) {
  if (heads.none()) return y;
  at::Tensor qi, ki;
  const KeptParts p = kept_parts(k_op, heads, q, k, v, qi, ki);
  const at::Tensor exact = SoftmaxAttention().forward(p.q, p.k, p.v);
  return y.index_copy(1, p.q_heads, exact.to(y.scalar_type()));
}

// ---- FullHeadsDecodeState ---------------------------------------------------------------

FullHeadsDecodeState::FullHeadsDecodeState(std::unique_ptr<DecodeState> windowed,
                                           FullHeads heads, int64_t batch)
    : windowed_(std::move(windowed)),
      heads_(std::move(heads)),
      cache_(batch, SoftmaxAttention::k_default_block, std::nullopt),
      batch_(batch) {
  check(windowed_ != nullptr, k_state_op, "no windowed state given");
  heads_.validate(k_state_op);
}

at::Tensor FullHeadsDecodeState::extend(const at::Tensor& q, const at::Tensor& k,
                                        const at::Tensor& v) {
  // Checks the heads before either state changes.
  const KeptParts p = kept_parts(k_state_op, heads_, q, k, v, q_index_, kv_index_);
  const at::Tensor y = windowed_->extend(q, k, v);
  const at::Tensor exact = cache_.extend(p.q, p.k, p.v);
  return y.index_copy(1, p.q_heads, exact.to(y.scalar_type()));
}

void FullHeadsDecodeState::absorb(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const KeptParts p = kept_parts(k_state_op, heads_, q, k, v, q_index_, kv_index_);
  windowed_->absorb(q, k, v);
  cache_.absorb(p.q, p.k, p.v);
}

int64_t FullHeadsDecodeState::state_bytes() const {
  return windowed_->state_bytes() + cache_.state_bytes();
}

StateSnapshot FullHeadsDecodeState::snapshot() const {
  StateSnapshot out = windowed_->snapshot();
  for (auto& [name, t] : cache_.snapshot().tensors) out.add("full_" + name, t);
  return out;
}

void FullHeadsDecodeState::restore(const StateSnapshot& snap) {
  check(tokens() == 0, k_state_op, "restore: the state already holds {} tokens", tokens());
  StateSnapshot windowed{.tokens = snap.tokens}, cache{.tokens = snap.tokens};
  for (const auto& [name, t] : snap.tensors) {
    if (name.rfind("full_", 0) == 0)
      cache.tensors.emplace_back(name.substr(5), t);
    else
      windowed.tensors.emplace_back(name, t);
  }
  check(snap.tokens == 0 || !cache.tensors.empty(), k_state_op,
        "restore: {} tokens but no 'full_k'/'full_v' (the kept heads' cache)", snap.tokens);
  cache_.restore(cache);
  try {
    windowed_->restore(windowed);
  } catch (...) {  // leave no half-restored state behind
    cache_ = SoftmaxKvCache(batch_, SoftmaxAttention::k_default_block, std::nullopt);
    throw;
  }
}

}  // namespace oal::attn
