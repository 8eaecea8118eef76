#pragma once
// The small synthetic model the analysis tests plant outlier dimensions in (hidden 64,
// 4 query / 2 KV heads of dim 16, one planted RoPE pair of scale 2, seed 5).
#include "oal/fixtures/synthetic.h"

namespace oal::test {

inline fixtures::SyntheticOptions planted_model_options(int64_t layers) {
  fixtures::SyntheticOptions o;
  o.hidden_size = 64;
  o.num_layers = layers;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.head_dim = 16;
  o.planted_pairs = 1;
  o.planted_scale = 2.0;
  o.seed = 5;
  return o;
}

}  // namespace oal::test
