#include "oal/linearize/splits.h"

#include <fmt/format.h>

#include "oal/analysis/analyze.h"
#include "oal/core/error.h"
#include "oal/text/corpus.h"

namespace oal::linearize {

Splits make_splits(const std::string& text, const text::Tokenizer& tokenizer, int64_t ctx,
                   const calib::BlockSplit& blocks, const std::optional<std::string>& prompt_text) {
  check(ctx >= 2, "splits", "ctx must be at least 2, got {}", ctx);
  blocks.validate(blocks.blocks_needed());
  Splits s;
  s.blocks = blocks;
  s.ctx = ctx;
  if (prompt_text) {
    s.grouping_paragraphs = text::split_paragraphs(*prompt_text);
    s.grouping_source = "a separate prompt text";
  } else {
    const int64_t used = blocks.blocks_needed() * ctx;
    s.grouping_paragraphs =
        analysis::paragraphs_after_tokens(text::split_paragraphs(text), tokenizer, used);
    s.grouping_source =
        fmt::format("paragraphs of the text after the first {} tokens (blocks 0..{})", used,
                    blocks.blocks_needed() - 1);
  }
  check(!s.grouping_paragraphs.empty(), "splits", "no grouping prompt is left: {}",
        s.grouping_source);
  return s;
}

std::vector<std::string> analysis_paragraphs(const std::string& text,
                                             const text::Tokenizer& tokenizer, int64_t ctx,
                                             int64_t after_tokens) {
  if (after_tokens < 0)
    return make_splits(text, tokenizer, ctx, {}, std::nullopt).grouping_paragraphs;
  const auto paragraphs = text::split_paragraphs(text);
  if (after_tokens == 0) return paragraphs;
  return analysis::paragraphs_after_tokens(paragraphs, tokenizer, after_tokens);
}

}  // namespace oal::linearize
