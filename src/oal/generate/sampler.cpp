#include "oal/generate/sampler.h"

#include <cmath>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"

namespace oal::generate {
namespace {
constexpr const char* k_op = "sampler";
}

Sampler::Sampler(SamplerOptions options) : options_(options), state_(options.seed) {
  check(std::isfinite(options.temperature) && options.temperature >= 0, k_op,
        "temperature must be >= 0 (0 = greedy), got {}", options.temperature);
  check(options.top_p > 0 && options.top_p <= 1, k_op, "top_p must lie in (0, 1], got {}",
        options.top_p);
  check(options.top_k >= 0, k_op, "top_k must be >= 0 (0 = no limit), got {}", options.top_k);
}

double Sampler::uniform() {
  // SplitMix64: tiny, well mixed, and identical on every standard library.
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

at::Tensor Sampler::distribution(const at::Tensor& logits) const {
  check_dim(logits, 1, k_op, "logits");
  check_floating(logits, k_op, "logits");
  check(logits.numel() > 0, k_op, "logits: expected at least one token");
  check_finite(logits, k_op, "logits");
  at::Tensor l = logits.to(at::kDouble);
  if (options_.temperature == 0) {
    return at::zeros_like(l).index_fill_(0, l.argmax(), 1.0);
  }
  at::Tensor p = at::softmax(l / options_.temperature, 0);
  const bool limit_k = options_.top_k > 0 && options_.top_k < p.numel();
  if (options_.top_p >= 1 && !limit_k) return p;
  // Stable descending sort so equal probabilities keep id order.
  auto [sorted, order] = p.sort(/*stable=*/true, 0, /*descending=*/true);
  at::Tensor keep = at::ones_like(sorted, at::kBool);
  if (limit_k) keep.narrow(0, options_.top_k, p.numel() - options_.top_k).fill_(false);
  // top-p over what top-k kept (as llama.cpp and HF apply them): mass strictly before
  // each token, renormalised to the kept set; the first token is always kept.
  at::Tensor in_k = at::where(keep, sorted, at::zeros_like(sorted));
  at::Tensor before = (in_k.cumsum(0) - in_k) / in_k.sum();
  if (options_.top_p < 1) keep = keep & (before < options_.top_p);
  at::Tensor kept = at::where(keep, sorted, at::zeros_like(sorted));
  kept = kept / kept.sum();
  return at::zeros_like(p).index_copy_(0, order, kept);
}

int64_t Sampler::greedy_f32(const at::Tensor& logits) const {
  const float* d = logits.data_ptr<float>();
  const int64_t n = logits.numel();
  int64_t best = 0;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(d[i]);
    if (d[i] > d[best]) best = i;  // strictly greater: the lowest id wins a tie
  }
  if (!finite) check_finite(logits, k_op, "logits");  // throws, naming the problem
  return best;
}

int64_t Sampler::sample(const at::Tensor& logits) {
  // Greedy on fp32 CPU logits (every serving and generate step): one pass over the row,
  // not the ~6 tensor operations of distribution(), which stays the reference for it.
  if (options_.temperature == 0 && logits.dim() == 1 && logits.numel() > 0 &&
      logits.scalar_type() == at::kFloat && logits.device().is_cpu() && logits.is_contiguous())
    return greedy_f32(logits);
  at::Tensor p = distribution(logits).contiguous();
  if (options_.temperature == 0) return p.argmax().item<int64_t>();
  const double* d = p.data_ptr<double>();
  const int64_t n = p.numel();
  const double u = uniform();
  double acc = 0;
  int64_t last = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (d[i] <= 0) continue;
    acc += d[i];
    last = i;
    if (u < acc) return i;
  }
  return last;  // rounding left u just above the total mass
}

}  // namespace oal::generate
