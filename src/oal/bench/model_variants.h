#pragma once
// The model variants the whole-model benchmarks compare (`oal bench --model`, with or
// without --train): "softmax" (the original), "oal" (every layer converted) and "hybrid"
// (the layers of a range, adapt/hybrid.h). Converted layers get OAL with synthetic
// kernels (bench_methods.h bench_kernels: speed does not depend on fitted values),
// beside an exact window when one is set.
#include <cstdint>
#include <string>
#include <vector>

#include "oal/attention/oal/chunked_attention.h"
#include "oal/attention/windowed/window.h"
#include "oal/model/transformer.h"

namespace oal::bench {

// The converted layers of a variant: none, all, or the hybrid `range`. Throws
// oal::Error("[bench] ...") for an unknown variant or a bad range.
std::vector<int64_t> variant_layers(const std::string& variant, const std::string& range,
                                    int64_t num_layers);

// "none", "3-26 of 30" for a contiguous run, else "24 of 30".
std::string describe_layers(const std::vector<int64_t>& layers, int64_t num_layers);

// Throws oal::Error("[bench] ...") unless the bench kernels can give `groups` groups to
// a head of `head_dim` dimensions (groups 1.. take two dimensions each, group 0 the
// rest: head_dim >= 2·groups − 1), with a hint for the largest that fits.
void check_variant_groups(int64_t groups, int64_t head_dim);

struct VariantSetup {
  int64_t chunk = 64, groups = 3;  // OAL layers: chunk size, groups per head
  attn::Window window{};           // set: the OAL layers run beside this exact window
  uint64_t seed = 0;
  bool trainable = false;          // kernels (and c_h) as trainable leaves, for --train
  // Training: from this many tokens the OAL layers use the linear-time chunked form
  // (attn::HdOptions::chunked_train_from).
  int64_t chunked_train_from = attn::k_default_chunked_train_from;
};

// Sets every layer's attention: OAL on `converted`, softmax (with the model's KV cache
// type) elsewhere; {} restores the original model.
void apply_variant(model::Transformer& m, const std::vector<int64_t>& converted,
                   const VariantSetup& setup);

}  // namespace oal::bench
