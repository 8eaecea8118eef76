#pragma once
// Hybrid models (paper Sec. 5.2, App. F): a contiguous range of middle layers runs a
// linearised attention method, the first and last layers keep softmax (LoLCATs-style).
// Generation then holds a KV cache in the softmax layers and a constant-size state in
// the converted ones (DecodeSession::state_bytes shows the split per layer).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oal/attention/method.h"
#include "oal/model/transformer.h"

namespace oal::adapt {

// The default replacement range, the paper's (Sec. 5.2, App. F) where it gives one:
// Qwen2.5-0.5B (24 layers) converts layers 3..20 and Llama-3.2-1B (16 layers) layers
// 1..14. Rule: from 24 layers on, the first three and last three layers keep softmax;
// below 24 layers, one layer at each end (16 → 1..14, stories260K's 5 → 1..3).
// Throws oal::Error("[hybrid] ...") below 3 layers (no middle layer exists; pass an
// explicit range).
std::vector<int64_t> default_converted_layers(int64_t num_layers);

// The rule above in words for `num_layers`, e.g. "default: layers 1-14, one softmax layer
// kept at each end (below 24 layers)". num_layers >= 3.
std::string default_range_rule(int64_t num_layers);

// Parses a user range ("1-3", "2,4", "default"/"" for the default) against the model's
// layer count; every index must be < num_layers (error names the range and the count).
std::vector<int64_t> parse_converted_layers(const std::string& spec, int64_t num_layers);

// Installs `methods` (layer -> method) into `model`; all other layers keep theirs.
// Throws for an out-of-range layer or a null method.
void apply_hybrid(model::Transformer& model,
                  const std::map<int64_t, std::shared_ptr<attn::AttentionMethod>>& methods);

// Per layer: the attention method's name and the bytes its decode state holds after
// `states` absorbed their tokens (e.g. to show KV caches growing while converted
// layers stay constant).
struct LayerStateBytes {
  int64_t layer = 0;
  std::string method;
  int64_t bytes = 0;
};
std::vector<LayerStateBytes> layer_state_bytes(
    const model::Transformer& model, const std::vector<std::unique_ptr<attn::DecodeState>>& states);

}  // namespace oal::adapt
