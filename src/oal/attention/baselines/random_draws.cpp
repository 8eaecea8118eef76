#include "oal/attention/baselines/random_draws.h"

#include <ATen/CPUGeneratorImpl.h>

namespace oal::attn {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t derive_seed(uint64_t base, std::initializer_list<int64_t> parts) {
  uint64_t h = splitmix64(base);
  for (int64_t p : parts) h = splitmix64(h ^ static_cast<uint64_t>(p));
  return h;
}

at::Generator seeded_generator(uint64_t seed) { return at::detail::createCPUGenerator(seed); }

at::Tensor seeded_normal(at::IntArrayRef shape, uint64_t seed) {
  at::Generator g = seeded_generator(seed);
  return at::normal(0.0, 1.0, shape, g, at::TensorOptions().dtype(at::kDouble));
}

at::Tensor seeded_uniform(at::IntArrayRef shape, uint64_t seed) {
  at::Generator g = seeded_generator(seed);
  at::Tensor u = at::empty(shape, at::TensorOptions().dtype(at::kDouble));
  u.uniform_(0.0, 1.0, g);
  // Keep strictly inside (0, 1) so inverse-CDF transforms stay finite.
  return u.clamp(1e-12, 1.0 - 1e-12);
}

}  // namespace oal::attn
