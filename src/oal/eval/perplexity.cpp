#include "oal/eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "oal/core/error.h"
#include "oal/core/tensor_checks.h"
#include "oal/text/block_tensor.h"

namespace oal::eval {
namespace {

constexpr const char* k_op = "perplexity";
// Logits materialised at once are capped at this many floats (256 MB), so a 150k-token
// vocabulary at ctx 4096 is scored a slice of positions at a time.
constexpr int64_t k_max_logit_floats = int64_t{1} << 26;

void check_options(const model::Transformer& model, const std::vector<int32_t>& stream,
                   const PerplexityOptions& o) {
  check(o.ctx >= 2, k_op, "ctx must be >= 2 (one input and one target), got {}", o.ctx);
  const int64_t max_pos = model.config().max_position_embeddings;
  check(max_pos <= 0 || o.ctx <= max_pos, k_op,
        "ctx {} exceeds the model's max_position_embeddings {}", o.ctx, max_pos);
  check(o.batch >= 1, k_op, "batch must be >= 1, got {}", o.batch);
  check(o.max_blocks >= 0, k_op, "max_blocks must be >= 0 (0 = all), got {}", o.max_blocks);
  check(!stream.empty(), k_op, "empty token stream; expected text with at least {} tokens",
        o.ctx);
  check(static_cast<int64_t>(stream.size()) >= o.ctx, k_op,
        "text has {} tokens, shorter than one block of ctx {}; expected at least {} tokens",
        stream.size(), o.ctx, o.ctx);
  check(o.first_block >= 0, k_op, "first_block must be >= 0, got {}", o.first_block);
  const int64_t blocks = static_cast<int64_t>(stream.size()) / o.ctx;
  check(o.first_block < blocks, k_op,
        "first_block {} is past the text's {} blocks of ctx {}; expected at most {}",
        o.first_block, blocks, o.ctx, blocks - 1);
}

// Sum of NLL per row of blocks [b, ctx] → [b] fp64, scoring positions 0..ctx-2.
at::Tensor block_nll_sums(const model::Transformer& model, const at::Tensor& blocks) {
  const int64_t b = blocks.size(0), ctx = blocks.size(1);
  at::Tensor h = model.hidden_states(blocks);  // [b, ctx, hidden]
  const int64_t vocab = model.config().vocab_size;
  const int64_t slice = std::max<int64_t>(1, k_max_logit_floats / (b * vocab));
  at::Tensor sums = at::zeros({b}, at::kDouble);
  for (int64_t start = 0; start < ctx - 1; start += slice) {
    const int64_t len = std::min(slice, ctx - 1 - start);
    at::Tensor logits = model.logits(h.narrow(1, start, len));
    sums += token_nll(logits, blocks.narrow(1, start + 1, len)).sum(1);
  }
  return sums;
}

}  // namespace

at::Tensor token_nll(const at::Tensor& logits, const at::Tensor& targets) {
  check_dim(logits, 3, k_op, "logits");
  check_dim(targets, 2, k_op, "targets");
  check(logits.size(0) == targets.size(0) && logits.size(1) == targets.size(1), k_op,
        "logits {} and targets {} disagree on [B, T]", shape_str(logits), shape_str(targets));
  at::Tensor lp = at::log_softmax(logits.to(at::kFloat), -1);
  return -lp.gather(-1, targets.unsqueeze(-1)).squeeze(-1).to(at::kDouble);
}

PerplexityResult perplexity(const model::Transformer& model, const std::vector<int32_t>& stream,
                            const PerplexityOptions& o) {
  check_options(model, stream, o);
  at::NoGradGuard no_grad;
  PerplexityResult r;
  r.ctx = o.ctx;
  r.stream_tokens = static_cast<int64_t>(stream.size());
  r.first_block = o.first_block;
  r.blocks = r.stream_tokens / o.ctx - o.first_block;
  if (o.max_blocks > 0) r.blocks = std::min(r.blocks, o.max_blocks);
  r.tokens = r.blocks * (o.ctx - 1);
  at::Tensor all = text::make_block_tensor(stream, o.ctx, {o.first_block, o.first_block + r.blocks});

  const auto t0 = std::chrono::steady_clock::now();
  double total = 0;
  for (int64_t start = 0; start < r.blocks; start += o.batch) {
    const int64_t b = std::min(o.batch, r.blocks - start);
    at::Tensor sums = block_nll_sums(model, all.narrow(0, start, b).contiguous());
    const double* s = sums.data_ptr<double>();
    for (int64_t i = 0; i < b; ++i) {
      check(std::isfinite(s[i]), k_op, "block {}: NLL is not finite; the model produced NaN/Inf",
            o.first_block + start + i);
      r.block_nll.push_back(s[i] / static_cast<double>(o.ctx - 1));
      total += s[i];
    }
    report(o.progress, start + b, r.blocks, "blocks",
           fmt::format("ppl {:.4f}", std::exp(total / ((start + b) * (o.ctx - 1.0)))));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.nll = total / static_cast<double>(r.tokens);
  r.ppl = std::exp(r.nll);
  r.tokens_per_second = r.seconds > 0 ? r.blocks * o.ctx / r.seconds : 0;
  if (r.blocks >= 2) {
    double mean = 0, ss = 0;
    for (double m : r.block_nll) mean += m;
    mean /= r.blocks;
    for (double m : r.block_nll) ss += (m - mean) * (m - mean);
    r.nll_stderr = std::sqrt(ss / (r.blocks - 1) / r.blocks);
    r.ppl_stderr = r.ppl * *r.nll_stderr;
  }
  return r;
}

}  // namespace oal::eval
