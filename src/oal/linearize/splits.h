#pragma once
// The data of one linearization run, from one text: the token stream's blocks that fit
// the kernels (train), select their checkpoints (val) and measure fidelity (eval), and
// the paragraphs whose contribution scores drive the grouping. The paper keeps these
// apart (App. B: grouping prompts, fitting and evaluation data never overlap); this is
// the one place that guarantees it: the grouping prompts are a separate text, or the
// paragraphs of the same text that start after every block the split uses.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "oal/calib/block_split.h"
#include "oal/text/tokenizer.h"

namespace oal::linearize {

struct Splits {
  calib::BlockSplit blocks;                      // train / val / eval block indices
  int64_t ctx = 0;                               // tokens per block
  std::vector<std::string> grouping_paragraphs;  // disjoint from every block
  std::string grouping_source;                   // where they come from, for run records
};

// `text`: the text the token stream is read from. `prompt_text`: a separate text of
// grouping prompts, if any. Validates `blocks`. Throws oal::Error("[splits] ...")
// when no paragraph is left after the blocks (naming the tokens they use).
Splits make_splits(const std::string& text, const text::Tokenizer& tokenizer, int64_t ctx,
                   const calib::BlockSplit& blocks, const std::optional<std::string>& prompt_text);

// The grouping prompts of an analysis alone (`oal analyze`, which cuts no blocks itself):
// the paragraphs of `text` after its first `after_tokens` tokens, or, for
// after_tokens < 0, after the blocks of `ctx` tokens the default split
// (calib::BlockSplit{}) of a later calibration on the same text uses, so that the two
// stay disjoint. Throws oal::Error("[analyze] ...") when no paragraph is left.
std::vector<std::string> analysis_paragraphs(const std::string& text,
                                             const text::Tokenizer& tokenizer, int64_t ctx,
                                             int64_t after_tokens);

}  // namespace oal::linearize
