#include "oal/bench/model_variants.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "oal/adapt/hybrid.h"
#include "oal/attention/method_names.h"
#include "oal/attention/oal/quadratic_attention.h"
#include "oal/attention/softmax/softmax_method.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/bench/bench_methods.h"
#include "oal/core/error.h"

namespace oal::bench {

std::vector<int64_t> variant_layers(const std::string& variant, const std::string& range,
                                    int64_t num_layers) {
  if (variant == attn::names::softmax) return {};
  std::vector<int64_t> all(static_cast<size_t>(num_layers));
  for (int64_t l = 0; l < num_layers; ++l) all[static_cast<size_t>(l)] = l;
  if (variant == attn::names::oal) return all;
  if (variant == "hybrid") return adapt::parse_converted_layers(range, num_layers);
  fail("bench", "unknown model variant '{}': expected {}, {} or hybrid", variant,
       attn::names::softmax, attn::names::oal);
}

std::string describe_layers(const std::vector<int64_t>& layers, int64_t num_layers) {
  if (layers.empty()) return "none";
  const bool contiguous = layers.back() - layers.front() + 1 == static_cast<int64_t>(layers.size());
  if (contiguous)
    return fmt::format("{}-{} of {}", layers.front(), layers.back(), num_layers);
  return fmt::format("{} of {}", layers.size(), num_layers);
}

void check_variant_groups(int64_t groups, int64_t head_dim) {
  check(groups >= 1 && 2 * groups - 1 <= head_dim, "bench",
        "--groups {}: the bench kernels need head_dim >= 2·groups − 1 (two dimensions per "
        "group after the first), this model's heads have {}; use --groups {} or fewer",
        groups, head_dim, std::max<int64_t>(1, (head_dim + 1) / 2));
}

void apply_variant(model::Transformer& m, const std::vector<int64_t>& converted,
                   const VariantSetup& setup) {
  const std::set<int64_t> conv(converted.begin(), converted.end());
  const model::ModelConfig& c = m.config();
  BenchShape s;
  s.q_heads = c.num_heads;
  s.kv_heads = c.num_kv_heads;
  s.dim = s.value_dim = c.head_dim;
  s.chunk = setup.chunk;
  attn::HdOptions options;
  options.chunk = setup.chunk;
  options.chunked_train_from = setup.chunked_train_from;
  for (int64_t l = 0; l < m.num_layers(); ++l) {
    s.seed = setup.seed + static_cast<uint64_t>(l);
    if (conv.count(l) == 0) {
      m.set_attention(
          l, std::make_shared<attn::SoftmaxAttention>(attn::SoftmaxAttention::k_default_block,
                                                      std::nullopt, m.options().kv_cache));
      continue;
    }
    auto oal = std::make_shared<attn::QuadraticAttention>(bench_kernels(s, setup.groups), options,
                                                          setup.trainable);
    if (setup.window.none())
      m.set_attention(l, oal);
    else
      m.set_attention(l, std::make_shared<attn::WindowedAttention>(
                             oal, setup.window, at::zeros({s.q_heads}), setup.trainable));
  }
}

}  // namespace oal::bench
