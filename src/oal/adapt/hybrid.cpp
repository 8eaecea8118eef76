#include "oal/adapt/hybrid.h"

#include <fmt/format.h>

#include "oal/core/error.h"
#include "oal/core/ranges.h"

namespace oal::adapt {
namespace {

// From this depth on three layers at each end keep softmax (Qwen2.5-0.5B: 24 → 3..20);
// shallower models keep one (Llama-3.2-1B: 16 → 1..14).
constexpr int64_t k_deep_model_layers = 24;

}  // namespace

std::vector<int64_t> default_converted_layers(int64_t num_layers) {
  check(num_layers >= 3, "hybrid",
        "the default range needs at least 3 layers (a softmax layer at each end), model "
        "has {}; pass an explicit layer range",
        num_layers);
  const int64_t keep = num_layers >= k_deep_model_layers ? 3 : 1;
  std::vector<int64_t> out;
  for (int64_t l = keep; l < num_layers - keep; ++l) out.push_back(l);
  return out;
}

std::string default_range_rule(int64_t num_layers) {
  const auto layers = default_converted_layers(num_layers);
  return fmt::format(
      "default: layers {}-{} of {}, {} softmax layer{} kept at each end ({} {} layers)",
      layers.front(), layers.back(), num_layers, layers.front() == 3 ? "three" : "one",
      layers.front() == 3 ? "s" : "", num_layers >= k_deep_model_layers ? "from" : "below",
      k_deep_model_layers);
}

std::vector<int64_t> parse_converted_layers(const std::string& spec, int64_t num_layers) {
  if (spec.empty() || spec == "default") return default_converted_layers(num_layers);
  return parse_index_list(spec, "layers", num_layers);
}

void apply_hybrid(model::Transformer& model,
                  const std::map<int64_t, std::shared_ptr<attn::AttentionMethod>>& methods) {
  for (const auto& [layer, method] : methods) {
    check(layer >= 0 && layer < model.num_layers(), "hybrid",
          "layer {} out of range: the model has {} layers (0..{})", layer, model.num_layers(),
          model.num_layers() - 1);
    check(method != nullptr, "hybrid", "layer {}: method is null", layer);
  }
  for (const auto& [layer, method] : methods) model.set_attention(layer, method);
}

std::vector<LayerStateBytes> layer_state_bytes(
    const model::Transformer& model,
    const std::vector<std::unique_ptr<attn::DecodeState>>& states) {
  check(int64_t(states.size()) == model.num_layers(), "hybrid", "expected {} layer states, got {}",
        model.num_layers(), states.size());
  std::vector<LayerStateBytes> out;
  for (int64_t l = 0; l < model.num_layers(); ++l)
    out.push_back({l, model.attention(l).name(), states[size_t(l)]->state_bytes()});
  return out;
}

}  // namespace oal::adapt
