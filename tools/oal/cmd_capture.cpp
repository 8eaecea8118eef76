// `oal capture`: post-RoPE q/k, v, per-head outputs, W_o and residuals of chosen layers
// over token blocks of a text, written to a safetensors file (docs/formats.md).
#include <fmt/core.h>

#include <filesystem>

#include "command.h"
#include "oal/analysis/capture.h"
#include "oal/core/error.h"
#include "oal/core/ranges.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/load.h"
#include "oal/text/block_tensor.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"
#include "progress_bar.h"

namespace {

struct CaptureArgs {
  std::string model, text, tokenizer, layers, blocks = "0", out;
  int64_t ctx = 0, batch = 1;
  bool quiet = false;
};

// The chosen blocks of the text's token stream (App. F.3 blocking) as [N, ctx] int64.
at::Tensor chosen_blocks(const std::vector<int32_t>& stream, int64_t ctx,
                         const std::vector<int64_t>& blocks) {
  const int64_t available = oal::text::block_count(static_cast<int64_t>(stream.size()), ctx);
  oal::check(available > 0, "capture", "text has {} tokens, shorter than one block of ctx {}",
             stream.size(), ctx);
  at::Tensor all = oal::text::make_block_tensor(stream, ctx);
  for (int64_t b : blocks)
    oal::check(b < available, "capture",
               "block {} out of range; the text has {} blocks of {} tokens", b, available, ctx);
  return all.index_select(0, at::tensor(blocks, at::kLong));
}

void run(const CaptureArgs& a) {
  oal::check(a.ctx >= 1, "capture", "--ctx must be >= 1, got {}", a.ctx);
  auto tok = oal::formats::open_tokenizer(a.model, a.tokenizer);
  const oal::model::Transformer model(oal::formats::load_model(a.model));
  const int64_t max_pos = model.config().max_position_embeddings;
  oal::check(max_pos <= 0 || a.ctx <= max_pos, "capture",
             "--ctx {} exceeds the model's max_position_embeddings {}", a.ctx, max_pos);
  const auto layers = oal::parse_index_list(a.layers, "capture --layers", model.num_layers());
  const auto blocks = oal::parse_index_list(a.blocks, "capture --blocks");
  const auto stream = tok->encode(oal::text::read_text_file(a.text), false);
  const at::Tensor tokens = chosen_blocks(stream, a.ctx, blocks);

  oal::cli::ProgressBar bar("capture", !a.quiet);
  oal::analysis::CaptureOptions o;
  o.layers = layers;
  o.batch = a.batch;
  o.progress = bar.fn();
  oal::analysis::Capture c = oal::analysis::capture(model, tokens, o);
  bar.finish();
  c.metadata["model"] = a.model;
  c.metadata["text"] = a.text;
  c.metadata["ctx"] = std::to_string(a.ctx);
  c.metadata["blocks"] = oal::format_index_list(blocks);
  oal::analysis::write_capture(a.out, c);
  fmt::print("wrote {} ({} layers x {} blocks of {} tokens, {:.1f} MiB)\n", a.out, layers.size(),
             blocks.size(), a.ctx, std::filesystem::file_size(a.out) / 1048576.0);
}

oal::cli::Registrar reg{
    "capture", "Record q/k/v, head outputs, W_o and residuals of chosen layers to safetensors",
    [](CLI::App& app) {
      auto a = std::make_shared<CaptureArgs>();
      app.add_option("--model", a->model, "HF model directory, .gguf file or llama2.c checkpoint")
          ->required();
      app.add_option("--text", a->text, "Text file (one token stream, no BOS)")->required();
      app.add_option("--layers", a->layers, "Layers, e.g. 0,2,4-7")->required();
      app.add_option("--ctx", a->ctx, "Block length in tokens")->required();
      app.add_option("--blocks", a->blocks, "Block indices of the stream, e.g. 0-15")
          ->capture_default_str();
      app.add_option("--out", a->out, "Output .safetensors file")->required();
      app.add_option("--batch", a->batch, "Blocks per forward")->capture_default_str();
      app.add_option("--tokenizer", a->tokenizer,
                     "Tokenizer file (default: tokenizer.json / tok512.bin / tokenizer.bin "
                     "beside the model)");
      app.add_flag("--quiet", a->quiet, "No progress bar");
      return [a] { run(*a); };
    }};

}  // namespace
