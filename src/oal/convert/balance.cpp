#include "oal/convert/balance.h"

#include <cmath>

#include <fmt/format.h>

#include "oal/adapt/hybrid.h"
#include "oal/attention/windowed/windowed_attention.h"
#include "oal/core/error.h"
#include "oal/eval/perplexity.h"

namespace oal::convert {
namespace {

constexpr const char* k_op = "balance";

const attn::WindowedAttention& windowed_layer(int64_t layer, const attn::AttentionMethod* m) {
  const auto* w = dynamic_cast<const attn::WindowedAttention*>(m);
  check(w != nullptr, k_op,
        "layer {} runs '{}' without a window: only windowed conversions (--sinks/--window) "
        "have a balance c_h to choose",
        layer, m ? m->name() : "nothing");
  check(w->base() != nullptr, k_op,
        "layer {} is the windowed-only method: it has no kernel to balance against the window",
        layer);
  return *w;
}

// Before any candidate is scored, so a bad request costs nothing.
void check_options(const BalanceOptions& o, size_t stream_tokens) {
  check(o.ctx >= 2, k_op, "ctx must be >= 2 (got {})", o.ctx);
  check(o.blocks >= 1, k_op, "blocks must be >= 1 (got {})", o.blocks);
  check(o.first_block >= 0, k_op, "first block must be >= 0 (got {})", o.first_block);
  const int64_t have = int64_t(stream_tokens) / o.ctx;
  check(have >= o.first_block + o.blocks, k_op,
        "blocks {}-{} of {} tokens asked, but the text has {} token(s): {} complete block(s)",
        o.first_block, o.first_block + o.blocks - 1, o.ctx, stream_tokens, have);
  for (double d : o.offsets)
    check(std::isfinite(d), k_op, "offsets must be finite (got {})", d);
}

}  // namespace

std::string BalanceScore::describe() const {
  return offset ? fmt::format("offset {:g}", *offset) : std::string("window-only");
}

LayerMethods offset_log_scales(const LayerMethods& methods, std::optional<double> offset) {
  check(!offset || std::isfinite(*offset), k_op, "offset must be finite (got {})",
        offset.value_or(0));
  LayerMethods out;
  for (const auto& [layer, m] : methods) {
    const attn::WindowedAttention& w = windowed_layer(layer, m.get());
    const at::Tensor c = w.log_scale().detach().to(at::kFloat);
    const at::Tensor shifted = offset ? c - *offset
                                      : at::full_like(c, attn::k_window_only_log_scale);
    auto balanced = std::make_shared<attn::WindowedAttention>(w.base(), w.window(), shifted);
    balanced->set_full_heads(w.full_heads());
    out[layer] = balanced;
  }
  return out;
}

BalanceChoice choose_balance(model::Transformer& model, const LayerMethods& methods,
                             const std::vector<int32_t>& stream, const BalanceOptions& o) {
  check(!methods.empty(), k_op, "no converted layers to balance");
  check_options(o, stream.size());
  std::vector<std::optional<double>> candidates(o.offsets.begin(), o.offsets.end());
  candidates.push_back(std::nullopt);  // the windowed-only rule
  const int64_t total = int64_t(candidates.size()) * o.blocks;
  BalanceChoice choice;
  for (const auto& offset : candidates) {
    BalanceScore s{offset};
    adapt::apply_hybrid(model, offset_log_scales(methods, offset));
    const int64_t done = int64_t(choice.scores.size()) * o.blocks;
    eval::PerplexityOptions po{.ctx = o.ctx, .max_blocks = o.blocks, .first_block = o.first_block};
    po.progress = [&](int64_t d, int64_t, std::string_view, std::string_view) {
      report(o.progress, done + d, total, "blocks", s.describe());
    };
    const eval::PerplexityResult r = eval::perplexity(model, stream, po);
    s.nll = r.nll;
    s.ppl = r.ppl;
    choice.scores.push_back(s);
  }
  for (size_t i = 1; i < choice.scores.size(); ++i)
    if (choice.scores[i].nll < choice.scores[choice.chosen].nll) choice.chosen = i;
  adapt::apply_hybrid(model, offset_log_scales(methods, choice.best().offset));
  return choice;
}

}  // namespace oal::convert
