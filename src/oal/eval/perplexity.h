#pragma once
// Perplexity with the paper's protocol (App. F.3): the text is one token stream (no
// BOS/EOS added), cut into independent non-overlapping blocks of `ctx` tokens, the
// incomplete tail dropped; in each block the ctx − 1 next-token targets are scored
// (every block starts from an empty context). PPL = exp(mean NLL over all targets).
//
// Standard error: every block has the same number of targets, so the mean NLL is the
// mean of the per-block mean NLLs m_b. Its standard error is s / sqrt(n) with s the
// sample standard deviation of m_b over the n blocks (blocks are treated as the
// independent units, tokens inside a block are not). It is carried to PPL by the delta
// method: se(PPL) ≈ PPL · se(NLL). Undefined (nullopt) with a single block.
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include "oal/core/progress.h"
#include "oal/model/transformer.h"

namespace oal::eval {

struct PerplexityOptions {
  int64_t ctx = 0;         // block length in tokens, >= 2 and <= max_position_embeddings
  int64_t batch = 1;       // blocks per forward
  int64_t max_blocks = 0;  // 0 → all complete blocks; else at most this many (the first ones)
  // Blocks before this one are skipped: blocks first_block.. are scored (a held-out range
  // that avoids blocks used elsewhere, e.g. for calibration).
  int64_t first_block = 0;
  ProgressFn progress;     // (done, total, "blocks", "ppl x.xx")
};

struct PerplexityResult {
  double ppl = 0;                     // exp(nll)
  double nll = 0;                     // mean NLL per target (nats)
  std::optional<double> nll_stderr;   // standard error of nll (see above)
  std::optional<double> ppl_stderr;   // ppl · nll_stderr
  int64_t tokens = 0;                 // scored targets = blocks · (ctx − 1)
  int64_t blocks = 0;
  int64_t first_block = 0;            // index of the first scored block in the stream
  int64_t ctx = 0;
  int64_t stream_tokens = 0;          // tokens in the whole stream
  double seconds = 0;                 // wall time of the forwards
  double tokens_per_second = 0;       // input tokens (blocks · ctx) per second
  std::vector<double> block_nll;      // mean NLL of each scored block, in stream order
};

// NLL of each target: logits [B, T, V] (float), targets [B, T] int64 → [B, T] fp64,
// −log softmax(logits)[target], computed in fp32 (log-sum-exp) and returned in fp64.
at::Tensor token_nll(const at::Tensor& logits, const at::Tensor& targets);

// stream: token ids of the whole text (as a Tokenizer returns them, no BOS).
// Throws oal::Error("[perplexity] ...") for ctx < 2, ctx beyond max_position_embeddings,
// batch < 1, negative max_blocks or first_block, or a stream shorter than one block (or
// without a block at first_block), saying how many tokens it has and how many are needed.
PerplexityResult perplexity(const model::Transformer& model, const std::vector<int32_t>& stream,
                            const PerplexityOptions& options);

}  // namespace oal::eval
