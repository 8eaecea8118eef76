#include "oal/model/rope.h"

#include <cmath>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::model {

at::Tensor llama3_scaled_inv_freq(const at::Tensor& inv_freq, const RopeScaling& s) {
  check(s.factor > 0 && s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor &&
            s.original_max_position_embeddings > 0,
        "rope", "llama3 rope_scaling: expected factor > 0, 0 < low_freq_factor < "
        "high_freq_factor, original_max_position_embeddings > 0 (got {}, {}, {}, {})",
        s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_position_embeddings);
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_len / s.low_freq_factor;
  const double high_wavelen = old_len / s.high_freq_factor;
  at::Tensor wavelen = (2.0 * M_PI) / inv_freq;
  at::Tensor smooth = (old_len / wavelen - s.low_freq_factor) /
                      (s.high_freq_factor - s.low_freq_factor);
  at::Tensor medium = (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;
  at::Tensor out = at::where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq);
  at::Tensor is_medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
  return at::where(is_medium, medium, out);
}

namespace {

// theta^(-2i/D) for i < D/2: [D/2] fp64.
at::Tensor base_inv_freq(int64_t head_dim, double theta) {
  at::Tensor i = at::arange(head_dim / 2, at::kDouble);
  return at::pow(theta, -2.0 * i / static_cast<double>(head_dim));
}

void check_freq_factors(const std::vector<double>& f, int64_t head_dim) {
  check(static_cast<int64_t>(f.size()) == head_dim / 2, "rope",
        "{} RoPE frequency factors for head_dim {}: expected one per rotary pair ({})", f.size(),
        head_dim, head_dim / 2);
  for (size_t i = 0; i < f.size(); ++i)
    check(std::isfinite(f[i]) && f[i] > 0, "rope",
          "RoPE frequency factor {} is {}: expected a finite value > 0", i, f[i]);
}

}  // namespace

std::vector<double> rope_freq_divisors(const ModelConfig& c) {
  check(!(c.rope_scaling && !c.rope_freq_factors.empty()), "rope",
        "both rope_scaling and rope_freq_factors are set: a model scales its RoPE one way");
  if (!c.rope_freq_factors.empty()) {
    check_freq_factors(c.rope_freq_factors, c.head_dim);
    return c.rope_freq_factors;
  }
  if (!c.rope_scaling) return {};
  const at::Tensor base = base_inv_freq(c.head_dim, c.rope_theta);
  const at::Tensor d = (base / llama3_scaled_inv_freq(base, *c.rope_scaling)).contiguous();
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

Rope::Rope(int64_t head_dim, double theta, RopeStyle style, std::optional<RopeScaling> scaling,
           const std::vector<double>& freq_factors)
    : head_dim_(head_dim), style_(style) {
  check(head_dim > 0 && head_dim % 2 == 0, "rope", "head_dim must be positive and even, got {}",
        head_dim);
  check(theta > 0 && std::isfinite(theta), "rope", "rope_theta must be positive, got {}", theta);
  check(!(scaling && !freq_factors.empty()), "rope",
        "both rope_scaling and frequency factors given: a model scales its RoPE one way");
  inv_freq_ = base_inv_freq(head_dim, theta);
  if (scaling) inv_freq_ = llama3_scaled_inv_freq(inv_freq_, *scaling);
  if (!freq_factors.empty()) {
    check_freq_factors(freq_factors, head_dim);
    inv_freq_ = inv_freq_ / at::tensor(freq_factors, at::kDouble);
  }
  inv_freq_ = inv_freq_.contiguous();
  inv_freq_values_.assign(inv_freq_.data_ptr<double>(),
                          inv_freq_.data_ptr<double>() + head_dim / 2);
}

Rope::Rope(const ModelConfig& c)
    : Rope(c.head_dim, c.rope_theta, c.rope_style, c.rope_scaling, c.rope_freq_factors) {}

std::pair<at::Tensor, at::Tensor> Rope::tables(int64_t offset, int64_t length) const {
  check(offset >= 0 && length >= 0, "rope", "positions must be non-negative (offset {}, length {})",
        offset, length);
  at::Tensor pos = at::arange(offset, offset + length, at::kDouble);
  at::Tensor angle = pos.unsqueeze(1) * inv_freq_.unsqueeze(0);  // [T, D/2]
  return {angle.cos(), angle.sin()};
}

at::Tensor Rope::apply(const at::Tensor& x, int64_t offset) const {
  check_dim(x, 4, "rope", "x");
  check_floating(x, "rope", "x");
  check(x.size(3) == head_dim_, "rope", "x: expected last dimension {} (head_dim), got shape {}",
        head_dim_, shape_str(x));
  auto [c64, s64] = tables(offset, x.size(2));
  // [T, D/2], broadcasts over [B, H]
  return rotate(x, c64.to(x.scalar_type()), s64.to(x.scalar_type()));
}

at::Tensor Rope::apply_rows(const at::Tensor& x, const std::vector<int64_t>& positions) const {
  check_dim(x, 4, "rope", "x");
  check_floating(x, "rope", "x");
  check(x.size(3) == head_dim_ && x.size(2) == 1 &&
            x.size(0) == static_cast<int64_t>(positions.size()),
        "rope", "apply_rows: expected x [{}, H, 1, {}] (one token per position), got shape {}",
        positions.size(), head_dim_, shape_str(x));
  for (int64_t p : positions) check(p >= 0, "rope", "positions must be non-negative, got {}", p);
  at::Tensor pos = at::tensor(positions, at::kLong).to(at::kDouble);
  at::Tensor angle = (pos.unsqueeze(1) * inv_freq_.unsqueeze(0)).view({x.size(0), 1, 1, -1});
  return rotate(x, angle.cos().to(x.scalar_type()), angle.sin().to(x.scalar_type()));
}

void Rope::rotate_rows(float* x, int64_t rows, int64_t heads, const int64_t* positions) const {
  const int64_t half = head_dim_ / 2;
  // Pair i of a head: elements (i, i + D/2) for the half style, (2i, 2i + 1) adjacent.
  const int64_t second = style_ == RopeStyle::half ? half : 1;
  const int64_t stride = style_ == RopeStyle::half ? 1 : 2;
  std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
  for (int64_t r = 0; r < rows; ++r) {
    check(positions[r] >= 0, "rope", "positions must be non-negative, got {}", positions[r]);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(positions[r]) * inv_freq_values_[i];
      c[i] = static_cast<float>(std::cos(angle));
      s[i] = static_cast<float>(std::sin(angle));
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (r * heads + h) * head_dim_;
      for (int64_t i = 0; i < half; ++i) {
        float& a = v[i * stride];
        float& b = v[i * stride + second];
        const float a0 = a, b0 = b;
        a = a0 * c[i] - b0 * s[i];
        b = b0 * c[i] + a0 * s[i];
      }
    }
  }
}

at::Tensor Rope::rotate(const at::Tensor& x, const at::Tensor& c, const at::Tensor& s) const {
  const int64_t half = head_dim_ / 2;
  if (style_ == RopeStyle::half) {
    at::Tensor x1 = x.narrow(3, 0, half);
    at::Tensor x2 = x.narrow(3, half, half);
    return at::cat({x1 * c - x2 * s, x2 * c + x1 * s}, 3);
  }
  at::Tensor pairs = x.reshape({x.size(0), x.size(1), x.size(2), half, 2});
  at::Tensor x0 = pairs.select(4, 0);
  at::Tensor x1 = pairs.select(4, 1);
  return at::stack({x0 * c - x1 * s, x0 * s + x1 * c}, 4).reshape(x.sizes());
}

}  // namespace oal::model
