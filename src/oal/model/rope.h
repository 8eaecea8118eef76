#pragma once
// Rotary position embeddings (RoPE) for both pairings of a head's dimensions:
//   half     (Hugging Face rotate_half): dimension i pairs with i + D/2, i < D/2;
//   adjacent (llama2.c run.c):          dimension 2i pairs with 2i + 1.
// Pair i rotates by angle  p * f_i  at position p, with f_i = theta^(-2i/D), optionally
// rescaled by Llama-3 rope_scaling (llama3_scaled_inv_freq) or divided by per-pair
// factors (GGUF rope_freqs; ModelConfig::rope_freq_factors). Angles are formed in fp64 and
// their cos/sin rounded once to the input dtype, so long positions lose no precision.
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "oal/model/config.h"

namespace oal::model {

// Llama-3 frequency rule (rope_type "llama3"), per pair frequency f with wavelength
// w = 2π/f, L = original_max_position_embeddings:
//   w < L / high_freq_factor  → f unchanged (high frequencies);
//   w > L / low_freq_factor   → f / factor (low frequencies);
//   otherwise smooth = (L / w − low) / (high − low), f' = (1 − smooth) f / factor + smooth f.
// inv_freq: [D/2] fp64 → [D/2] fp64.
at::Tensor llama3_scaled_inv_freq(const at::Tensor& inv_freq, const RopeScaling& s);

// The divisors d_i with f'_i = theta^(-2i/D) / d_i that `config`'s scaling applies
// ([D/2], fp64): its rope_freq_factors, or those Llama-3 rope_scaling amounts to (what
// llama.cpp's converter stores as rope_freqs.weight), or empty when nothing is scaled.
// Throws oal::Error("rope") for factors of the wrong length, non-positive or non-finite
// factors, or both forms set at once.
std::vector<double> rope_freq_divisors(const ModelConfig& config);

class Rope {
 public:
  // head_dim must be even; theta > 0; freq_factors empty or [D/2], each finite > 0.
  Rope(int64_t head_dim, double theta, RopeStyle style,
       std::optional<RopeScaling> scaling = std::nullopt,
       const std::vector<double>& freq_factors = {});
  explicit Rope(const ModelConfig& config);

  // Frequencies f_i after scaling: [D/2] fp64.
  const at::Tensor& inv_freq() const { return inv_freq_; }
  RopeStyle style() const { return style_; }
  int64_t head_dim() const { return head_dim_; }

  // cos and sin of the angles for positions offset .. offset+T-1: each [T, D/2] fp64.
  std::pair<at::Tensor, at::Tensor> tables(int64_t offset, int64_t length) const;

  // Rotates x [B, H, T, D] (any float dtype) whose token t sits at position offset + t.
  // Returns a new tensor of x's dtype; differentiable with respect to x.
  at::Tensor apply(const at::Tensor& x, int64_t offset) const;
  // Rotates x [B, H, 1, D] whose row b holds one token at position positions[b]
  // (positions.size() == B): decode steps of sequences at different lengths.
  at::Tensor apply_rows(const at::Tensor& x, const std::vector<int64_t>& positions) const;
  // In place on fp32 x [rows, heads, D] (contiguous), row r at position positions[r] >= 0:
  // apply_rows without tensors, for the decode step (decode_layer.h). Same angles (fp64,
  // cos/sin rounded once to fp32); the rotation may round differently by an ulp (FMA).
  void rotate_rows(float* x, int64_t rows, int64_t heads, const int64_t* positions) const;

 private:
  // x rotated by angles whose cos c and sin s [..., D/2] broadcast against x's pairs.
  at::Tensor rotate(const at::Tensor& x, const at::Tensor& c, const at::Tensor& s) const;
  int64_t head_dim_;
  RopeStyle style_;
  at::Tensor inv_freq_;
  std::vector<double> inv_freq_values_;  // inv_freq_'s values, for rotate_rows
};

}  // namespace oal::model
