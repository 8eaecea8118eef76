#pragma once
// An independent, deliberately plain forward of a Llama / Qwen2 checkpoint for tests:
// fp64, one token at a time, explicit loops for RoPE and attention, written from the
// HF modeling code's description and sharing nothing with oal::model::Transformer.
#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <vector>

#include "oal/model/weights.h"

namespace oal::test {

// Per-pair RoPE frequencies, scalar loops (HF _compute_llama3_parameters for scaling).
inline std::vector<double> reference_inv_freq(const oal::model::ModelConfig& c) {
  const int64_t half = c.head_dim / 2;
  std::vector<double> f(half);
  for (int64_t i = 0; i < half; ++i) {
    double freq = std::pow(c.rope_theta, -2.0 * double(i) / double(c.head_dim));
    if (c.rope_scaling) {
      const auto& s = *c.rope_scaling;
      const double old_len = double(s.original_max_position_embeddings);
      const double wavelen = 2 * M_PI / freq;
      if (wavelen < old_len / s.high_freq_factor) {
        // high frequency: unchanged
      } else if (wavelen > old_len / s.low_freq_factor) {
        freq = freq / s.factor;
      } else {
        const double smooth =
            (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        freq = (1 - smooth) * freq / s.factor + smooth * freq;
      }
    }
    f[i] = freq;
  }
  return f;
}

// Rotates one head vector x [D] (fp64, contiguous) in place at position `pos`.
inline void reference_rotate(double* x, int64_t d, int64_t pos, const std::vector<double>& inv,
                             bool adjacent) {
  for (int64_t i = 0; i < d / 2; ++i) {
    const double a = double(pos) * inv[i];
    const int64_t r0 = adjacent ? 2 * i : i;
    const int64_t r1 = adjacent ? 2 * i + 1 : i + d / 2;
    const double x0 = x[r0], x1 = x[r1];
    x[r0] = x0 * std::cos(a) - x1 * std::sin(a);
    x[r1] = x1 * std::cos(a) + x0 * std::sin(a);
  }
}

inline at::Tensor reference_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return x / std::sqrt((x * x).mean().item<double>() + eps) * w;
}

// logits [T, V] fp64 for one sequence of token ids.
inline at::Tensor reference_logits(const oal::model::ModelWeights& mw,
                                   const std::vector<int64_t>& tokens) {
  const auto& c = mw.config;
  auto W = [&](const std::string& n) { return mw.tensors.at(n).to(at::kDouble); };
  auto lin = [&](const std::string& n, const at::Tensor& x) {
    at::Tensor y = at::mv(W(n + ".weight"), x);
    if (mw.tensors.count(n + ".bias")) y = y + W(n + ".bias");
    return y;
  };
  const int64_t D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads, L = c.num_layers;
  const auto inv = reference_inv_freq(c);
  const bool adjacent = c.rope_style == oal::model::RopeStyle::adjacent;
  std::vector<std::vector<at::Tensor>> keys(L), values(L);  // per layer, per position [Hkv, D]
  std::vector<at::Tensor> out;
  const at::Tensor embed = W("model.embed_tokens.weight");
  const at::Tensor head = c.tie_word_embeddings ? embed : W("lm_head.weight");
  for (size_t t = 0; t < tokens.size(); ++t) {
    at::Tensor x = embed[tokens[t]].clone();
    for (int64_t l = 0; l < L; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      at::Tensor h = reference_rms_norm(x, W(p + "input_layernorm.weight"), c.rms_norm_eps);
      at::Tensor q = lin(p + "self_attn.q_proj", h).view({Hq, D}).contiguous();
      at::Tensor k = lin(p + "self_attn.k_proj", h).view({Hkv, D}).contiguous();
      at::Tensor v = lin(p + "self_attn.v_proj", h).view({Hkv, D}).contiguous();
      for (int64_t i = 0; i < Hq; ++i) reference_rotate(q[i].data_ptr<double>(), D, t, inv, adjacent);
      for (int64_t i = 0; i < Hkv; ++i) reference_rotate(k[i].data_ptr<double>(), D, t, inv, adjacent);
      keys[l].push_back(k);
      values[l].push_back(v);
      at::Tensor attn = at::zeros({Hq, D}, at::kDouble);
      for (int64_t hq = 0; hq < Hq; ++hq) {
        const int64_t kv = hq / (Hq / Hkv);
        std::vector<double> s(t + 1);
        double mx = -INFINITY, z = 0;
        for (size_t j = 0; j <= t; ++j) {
          s[j] = at::dot(q[hq], keys[l][j][kv]).item<double>() / std::sqrt(double(D));
          mx = std::max(mx, s[j]);
        }
        for (size_t j = 0; j <= t; ++j) z += std::exp(s[j] - mx);
        for (size_t j = 0; j <= t; ++j) attn[hq] += std::exp(s[j] - mx) / z * values[l][j][kv];
      }
      x = x + lin(p + "self_attn.o_proj", attn.flatten());
      h = reference_rms_norm(x, W(p + "post_attention_layernorm.weight"), c.rms_norm_eps);
      at::Tensor g = lin(p + "mlp.gate_proj", h);
      x = x + lin(p + "mlp.down_proj", g / (1 + at::exp(-g)) * lin(p + "mlp.up_proj", h));
    }
    out.push_back(at::mv(head, reference_rms_norm(x, W("model.norm.weight"), c.rms_norm_eps)));
  }
  return at::stack(out);
}

}  // namespace oal::test
