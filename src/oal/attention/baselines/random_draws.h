#pragma once
// Seeded random draws for the fixed parts of baselines (Performer projections, DiJiang
// samples, SpectraFormer FastFood vectors): one independent, reproducible stream per
// (seed, layer, head, purpose), on the CPU generator, whatever the thread count.
#include <ATen/ATen.h>

#include <cstdint>
#include <initializer_list>

namespace oal::attn {

// Mixes a base seed with identifying integers (splitmix64 chain): different parts give
// unrelated streams, the same parts always the same stream.
uint64_t derive_seed(uint64_t base, std::initializer_list<int64_t> parts);

// A CPU generator seeded with `seed`.
at::Generator seeded_generator(uint64_t seed);

// Standard normal samples [shape] fp64 from `seed` (CPU).
at::Tensor seeded_normal(at::IntArrayRef shape, uint64_t seed);
// Uniform (0, 1) samples [shape] fp64 from `seed` (CPU).
at::Tensor seeded_uniform(at::IntArrayRef shape, uint64_t seed);

}  // namespace oal::attn
