#include "oal/model/transformer.h"

#include <c10/core/GradMode.h>

#include <algorithm>

#include "oal/attention/softmax/softmax_method.h"
#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"
#include "oal/model/decode_layer.h"
#include "oal/model/layer_checkpoint.h"

namespace oal::model {
namespace {

constexpr const char* k_op = "transformer";

void check_config(const ModelConfig& c) {
  check(c.hidden_size > 0 && c.intermediate_size > 0 && c.num_layers > 0 && c.num_heads > 0 &&
            c.num_kv_heads > 0 && c.head_dim > 0 && c.vocab_size > 0,
        k_op, "config: expected positive hidden_size, intermediate_size, num_layers, heads, "
        "head_dim and vocab_size");
  check(c.num_heads % c.num_kv_heads == 0, k_op,
        "config: num_heads {} must be a multiple of num_key_value_heads {}", c.num_heads,
        c.num_kv_heads);
  check(c.rms_norm_eps > 0, k_op, "config: rms_norm_eps must be positive, got {}", c.rms_norm_eps);
}

// Finds the float tensor `name` with exactly `shape`, as fp32.
at::Tensor take(const ModelWeights& w, const std::string& name, std::vector<int64_t> shape) {
  auto it = w.tensors.find(name);
  check(it != w.tensors.end(), k_op, "missing tensor '{}' (expected shape {})", name,
        fmt::join(shape, "x"));
  const at::Tensor& t = it->second;
  check(t.sizes().vec() == shape, k_op, "tensor '{}': expected shape [{}], got {}", name,
        fmt::join(shape, ", "), shape_str(t));
  check_floating(t, k_op, name);
  return t.to(at::kFloat).contiguous();
}

// The weight `name` [out, in] (float or quantized) held as options.weights asks, its
// decode products by options.quant_dot.
Linear take_weight(const ModelWeights& w, const std::string& name, int64_t out, int64_t in,
                   const TransformerOptions& options) {
  const WeightFormat format = options.weights;
  HeldWeight h;
  if (auto q = w.quantized.find(name); q != w.quantized.end()) {
    check(q->second.rows == out && q->second.cols == in, k_op,
          "tensor '{}': expected shape [{}, {}], got [{}, {}]", name, out, in, q->second.rows,
          q->second.cols);
    h = hold_weight({}, q->second, format, name);
  } else {
    auto it = w.tensors.find(name);
    check(it != w.tensors.end(), k_op, "missing tensor '{}' (expected shape {}x{})", name, out, in);
    check(it->second.sizes().vec() == std::vector<int64_t>{out, in}, k_op,
          "tensor '{}': expected shape [{}, {}], got {}", name, out, in, shape_str(it->second));
    check_floating(it->second, k_op, name);
    h = hold_weight(it->second, {}, format, name);
  }
  Linear l;
  l.weight = h.dense;
  l.quant = h.quant;
  l.quant_dot = options.quant_dot;
  return l;
}

Linear take_linear(const ModelWeights& w, const std::string& prefix, int64_t out, int64_t in,
                   bool with_bias, const TransformerOptions& options) {
  Linear l = take_weight(w, prefix + ".weight", out, in, options);
  if (with_bias) l.bias = take(w, prefix + ".bias", {out});
  return l;
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  at::Tensor var = x.pow(2).mean(-1, /*keepdim=*/true);
  return x * at::rsqrt(var + eps) * weight;
}

Transformer::Transformer(const ModelWeights& w, TransformerOptions options)
    : config_(w.config), options_(options), rope_((check_config(w.config), w.config)) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  embed_ = take_weight(w, "model.embed_tokens.weight", c.vocab_size, H, options_);
  final_norm_ = take(w, "model.norm.weight", {H});
  if (c.tie_word_embeddings) {
    lm_head_ = embed_;
  } else {
    lm_head_ = take_linear(w, "lm_head", c.vocab_size, H, false, options_);
  }
  auto softmax = std::make_shared<attn::SoftmaxAttention>(attn::SoftmaxAttention::k_default_block,
                                                          std::nullopt, options.kv_cache);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    TransformerLayer L;
    L.attn_norm = take(w, p + "input_layernorm.weight", {H});
    L.mlp_norm = take(w, p + "post_attention_layernorm.weight", {H});
    L.q_proj =
        take_linear(w, p + "self_attn.q_proj", c.num_heads * D, H, c.attention_bias, options_);
    L.k_proj =
        take_linear(w, p + "self_attn.k_proj", c.num_kv_heads * D, H, c.attention_bias, options_);
    L.v_proj =
        take_linear(w, p + "self_attn.v_proj", c.num_kv_heads * D, H, c.attention_bias, options_);
    L.o_proj = take_linear(w, p + "self_attn.o_proj", H, c.num_heads * D, false, options_);
    L.gate_proj = take_linear(w, p + "mlp.gate_proj", I, H, false, options_);
    L.up_proj = take_linear(w, p + "mlp.up_proj", I, H, false, options_);
    L.down_proj = take_linear(w, p + "mlp.down_proj", H, I, false, options_);
    L.attention = softmax;
    layers_.push_back(std::move(L));
  }
}

int64_t Transformer::num_parameters() const {
  auto params = [](const Linear& l) {
    return l.out_features() * l.in_features() + (l.bias.defined() ? l.bias.numel() : 0);
  };
  int64_t n = params(embed_) + final_norm_.numel();
  if (!config_.tie_word_embeddings) n += params(lm_head_);
  for (const auto& L : layers_) {
    n += L.attn_norm.numel() + L.mlp_norm.numel();
    for (const Linear* l : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj,
                            &L.up_proj, &L.down_proj})
      n += params(*l);
  }
  return n;
}

int64_t Transformer::weight_bytes() const {
  auto bytes = [](const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; };
  int64_t n = embed_.nbytes() + bytes(final_norm_);
  if (!config_.tie_word_embeddings) n += lm_head_.nbytes();
  for (const auto& L : layers_) {
    n += bytes(L.attn_norm) + bytes(L.mlp_norm);
    for (const Linear* l : {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj,
                            &L.up_proj, &L.down_proj})
      n += l->nbytes();
  }
  return n;
}

at::Tensor Transformer::embedding_rows(const at::Tensor& idx) const {
  if (embed_.quant.defined()) return embed_.quant.dequantize_rows(idx).to(device());
  return at::index_select(embed_.weight, 0, idx.to(embed_.weight.device())).to(at::kFloat);
}

at::Device Transformer::device() const { return final_norm_.device(); }

TransformerLayer& Transformer::layer(int64_t i) {
  check(i >= 0 && i < num_layers(), k_op, "layer {} out of range; expected 0..{}", i,
        num_layers() - 1);
  return layers_[i];
}

const TransformerLayer& Transformer::layer(int64_t i) const {
  return const_cast<Transformer*>(this)->layer(i);
}

void Transformer::set_attention(int64_t i, std::shared_ptr<attn::AttentionMethod> method) {
  check(method != nullptr, k_op, "set_attention: layer {}: expected a method, got null", i);
  layer(i).attention = std::move(method);
}

const attn::AttentionMethod& Transformer::attention(int64_t i) const { return *layer(i).attention; }

at::Tensor Transformer::embed(const at::Tensor& tokens, int64_t offset) const {
  check_dim(tokens, 2, k_op, "tokens");
  check(tokens.scalar_type() == at::kLong, k_op, "tokens: expected int64, got {}",
        c10::toString(tokens.scalar_type()));
  check(tokens.size(1) > 0, k_op, "tokens: expected at least one token per row, got shape {}",
        shape_str(tokens));
  if (tokens.numel() > 0) {
    const int64_t lo = tokens.min().item<int64_t>(), hi = tokens.max().item<int64_t>();
    check(lo >= 0 && hi < config_.vocab_size, k_op,
          "token ids must lie in [0, {}), got range [{}, {}]", config_.vocab_size, lo, hi);
  }
  const int64_t end = offset + tokens.size(1);
  check(config_.max_position_embeddings <= 0 || end <= config_.max_position_embeddings, k_op,
        "positions {}..{} exceed max_position_embeddings {}", offset, end - 1,
        config_.max_position_embeddings);
  at::Tensor x = embedding_rows(tokens.reshape({-1}));
  return x.reshape({tokens.size(0), tokens.size(1), config_.hidden_size});
}

at::Tensor Transformer::layer_forward(int64_t i, const at::Tensor& x, int64_t offset,
                                      attn::DecodeState* state,
                                      ForwardObserver* observer) const {
  const TransformerLayer& L = layers_[i];
  const ModelConfig& c = config_;
  const int64_t B = x.size(0), T = x.size(1), D = c.head_dim;
  const bool report = observer && observer->wants(i);
  if (state && T == 1 && !report && rowwise(L, x)) {
    const std::vector<int64_t> positions(static_cast<size_t>(B), offset);
    auto attend = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      return state->extend(q, k, v);
    };
    return decode_layer(L, c, rope_, x.reshape({B, c.hidden_size}), positions, attend)
        .view({B, 1, c.hidden_size});
  }
  at::Tensor h = rms_norm(x, L.attn_norm, c.rms_norm_eps);
  // [B, T, H*D] -> [B, H, T, D]
  auto heads = [&](const at::Tensor& t, int64_t n) {
    return t.view({B, T, n, D}).transpose(1, 2);
  };
  at::Tensor q = rope_.apply(heads(L.q_proj.forward(h), c.num_heads), offset);
  at::Tensor k = rope_.apply(heads(L.k_proj.forward(h), c.num_kv_heads), offset);
  at::Tensor v = heads(L.v_proj.forward(h), c.num_kv_heads).contiguous();
  at::Tensor y = state ? state->extend(q, k, v) : L.attention->forward(q, k, v);
  if (report) observer->attention(i, q, k, v, y);
  at::Tensor out = finish_layer(L, x, y);
  if (report) observer->layer_output(i, out);
  return out;
}

at::Tensor Transformer::finish_layer(const TransformerLayer& L, const at::Tensor& x,
                                     const at::Tensor& y) const {
  const ModelConfig& c = config_;
  at::Tensor out =
      x +
      L.o_proj.forward(y.transpose(1, 2).reshape({x.size(0), x.size(1), c.num_heads * c.head_dim}));
  at::Tensor h = rms_norm(out, L.mlp_norm, c.rms_norm_eps);
  return out + L.down_proj.forward(at::silu(L.gate_proj.forward(h)) * L.up_proj.forward(h));
}

at::Tensor Transformer::layer_rows(int64_t i, const at::Tensor& x, const RowSpans& spans,
                                   const std::vector<LayerStates*>& rows) const {
  const TransformerLayer& L = layers_[i];
  const ModelConfig& c = config_;
  const int64_t M = x.size(0), D = c.head_dim;
  // Row r's tokens attend through its own states: q/k/v [M, H, 1, D] → y [M, Hq, 1, D].
  // A row's span [T, H, 1, D] is its states' [1, H, T, D] transposed (for one token, the
  // same memory: a decode row takes no copy and no view beyond its narrow; the views
  // cost microseconds each, on every layer of every step).
  auto attend = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    const bool one_row = rows.size() == 1;
    auto span = [&](const at::Tensor& t, int64_t s0, int64_t T) {
      if (T == 1) return one_row ? t : t.narrow(0, s0, 1);
      return t.narrow(0, s0, T).squeeze(2).transpose(0, 1).unsqueeze(0).contiguous();
    };
    std::vector<at::Tensor> ys;
    ys.reserve(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      const int64_t s0 = spans.starts[r], T = spans.starts[r + 1] - s0;
      attn::DecodeState& state = *(*rows[r])[i];
      check(state.tokens() == spans.positions[s0], k_op,
            "extend_rows: row {} layer {} state holds {} tokens, layer 0 holds {}", r, i,
            state.tokens(), spans.positions[s0]);
      at::Tensor y = state.extend(span(q, s0, T), span(k, s0, T), span(v, s0, T));
      ys.push_back(T == 1 ? y : y.squeeze(0).transpose(0, 1).unsqueeze(2));
    }
    return one_row ? ys[0] : at::cat(ys, 0);
  };
  // The row path is for decode steps (one token per row, where ATen's per-op cost
  // would dominate); a step that also reads prompt pieces takes the tensor layer, whose
  // batched operations are faster for many rows.
  const bool decode_only = M == static_cast<int64_t>(rows.size());
  if (decode_only && rowwise(L, x))
    return decode_layer(L, c, rope_, x.reshape({M, c.hidden_size}), spans.positions, attend)
        .view({M, 1, c.hidden_size});
  at::Tensor h = rms_norm(x, L.attn_norm, c.rms_norm_eps);
  auto heads = [&](const at::Tensor& t, int64_t n) { return t.view({M, 1, n, D}).transpose(1, 2); };
  at::Tensor q = rope_.apply_rows(heads(L.q_proj.forward(h), c.num_heads), spans.positions);
  at::Tensor k = rope_.apply_rows(heads(L.k_proj.forward(h), c.num_kv_heads), spans.positions);
  at::Tensor v = heads(L.v_proj.forward(h), c.num_kv_heads);
  return finish_layer(L, x, attend(q, k, v));
}

bool Transformer::rowwise(const TransformerLayer& L, const at::Tensor& x) const {
  return options_.rowwise_decode && decode_layer_can_run(L, x);
}

at::Tensor Transformer::hidden_states(const at::Tensor& tokens, ForwardObserver* observer) const {
  at::Tensor x = embed(tokens, 0);
  const bool checkpoint =
      options_.checkpoint_layers && c10::GradMode::is_enabled() && observer == nullptr;
  for (int64_t i = 0; i < num_layers(); ++i)
    x = checkpoint ? checkpointed_layer(*this, i, x) : layer_forward(i, x, 0, nullptr, observer);
  return rms_norm(x, final_norm_, config_.rms_norm_eps);
}

at::Tensor Transformer::layer(int64_t i, const at::Tensor& x) const {
  check(i >= 0 && i < num_layers(), k_op, "layer {}: the model has {} layers", i, num_layers());
  return layer_forward(i, x, 0, nullptr, nullptr);
}

void Transformer::observe(const at::Tensor& tokens, ForwardObserver& observer) const {
  int64_t deepest = num_layers() - 1;
  while (deepest >= 0 && !observer.wants(deepest)) --deepest;
  if (deepest < 0) return;
  at::Tensor x = embed(tokens, 0);
  for (int64_t i = 0; i <= deepest; ++i) x = layer_forward(i, x, 0, nullptr, &observer);
}

at::Tensor Transformer::forward(const at::Tensor& tokens, ForwardObserver* observer) const {
  return logits(hidden_states(tokens, observer));
}

std::vector<std::unique_ptr<attn::DecodeState>> Transformer::new_states(int64_t batch) const {
  check(batch > 0, k_op, "new_states: batch must be positive, got {}", batch);
  std::vector<std::unique_ptr<attn::DecodeState>> states;
  for (const auto& L : layers_) states.push_back(L.attention->new_state(batch));
  return states;
}

at::Tensor Transformer::extend_hidden(
    const at::Tensor& tokens, std::vector<std::unique_ptr<attn::DecodeState>>& states) const {
  check(static_cast<int64_t>(states.size()) == num_layers(), k_op,
        "extend: expected {} layer states, got {}", num_layers(), states.size());
  check_dim(tokens, 2, k_op, "extend: tokens");
  const int64_t T = tokens.size(1), ub = options_.ubatch;
  if (ub <= 0 || T <= ub) return extend_once(tokens, states);
  std::vector<at::Tensor> parts;
  for (int64_t t0 = 0; t0 < T; t0 += ub)
    parts.push_back(extend_once(tokens.narrow(1, t0, std::min(ub, T - t0)), states));
  return at::cat(parts, 1);
}

at::Tensor Transformer::extend_once(const at::Tensor& tokens,
                                    std::vector<std::unique_ptr<attn::DecodeState>>& states) const {
  const int64_t offset = states[0]->tokens();
  at::Tensor x = embed(tokens, offset);
  for (int64_t i = 0; i < num_layers(); ++i) {
    check(states[i]->tokens() == offset, k_op,
          "extend: layer {} state holds {} tokens, layer 0 holds {}", i, states[i]->tokens(),
          offset);
    x = layer_forward(i, x, offset, states[i].get(), nullptr);
  }
  return rms_norm(x, final_norm_, config_.rms_norm_eps);
}

at::Tensor Transformer::extend_rows(const std::vector<at::Tensor>& tokens,
                                    const std::vector<LayerStates*>& rows) const {
  const int64_t R = static_cast<int64_t>(rows.size());
  check(R > 0 && R == static_cast<int64_t>(tokens.size()), k_op,
        "extend_rows: expected one state set per token row, got {} token rows and {} state sets",
        tokens.size(), R);
  RowSpans spans;
  spans.starts.push_back(0);
  for (int64_t r = 0; r < R; ++r) {
    check(rows[r] != nullptr && static_cast<int64_t>(rows[r]->size()) == num_layers(), k_op,
          "extend_rows: row {}: expected {} layer states", r, num_layers());
    check_dim(tokens[r], 1, k_op, "extend_rows: tokens");
    const int64_t T = tokens[r].size(0), p0 = rows[r]->front()->tokens();
    check(T > 0, k_op, "extend_rows: row {}: expected at least one token", r);
    for (int64_t t = 0; t < T; ++t) spans.positions.push_back(p0 + t);
    spans.starts.push_back(spans.starts.back() + T);
  }
  const int64_t M = spans.starts.back();
  // embed() checks the furthest position against max_position_embeddings.
  at::Tensor x = embed(at::cat(tokens).view({M, 1}),
                       *std::max_element(spans.positions.begin(), spans.positions.end()));
  for (int64_t i = 0; i < num_layers(); ++i) x = layer_rows(i, x, spans, rows);
  std::vector<int64_t> last(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) last[r] = spans.starts[r + 1] - 1;
  at::Tensor h = R == M ? x : x.index_select(0, at::tensor(last, at::kLong));
  return rms_norm(h, final_norm_, config_.rms_norm_eps).view({R, config_.hidden_size});
}

}  // namespace oal::model
