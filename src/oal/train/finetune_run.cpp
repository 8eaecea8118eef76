#include "oal/train/finetune_run.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "oal/adapt/hybrid.h"
#include "oal/convert/convert.h"
#include "oal/core/error.h"
#include "oal/formats/find_tokenizer.h"
#include "oal/formats/load.h"
#include "oal/io/atomic_file.h"
#include "oal/io/safetensors.h"
#include "oal/text/block_tensor.h"
#include "oal/text/corpus.h"
#include "oal/text/tokenizer.h"

namespace oal::train {
namespace fs = std::filesystem;
namespace {

// Validation blocks cut from the training text must not be trained on: the same file
// with overlapping block ranges is refused (the default "all" / ":32" on one file is).
void check_disjoint_blocks(const FinetuneRunOptions& o) {
  std::error_code ec;
  if (!fs::equivalent(o.train_text, o.val_text, ec)) return;
  const text::BlockRange t = text::parse_block_range(o.train_blocks),
                         v = text::parse_block_range(o.val_blocks);
  auto end = [](const text::BlockRange& r) {
    return r.end < 0 ? std::numeric_limits<int64_t>::max() : r.end;
  };
  check(end(t) <= v.begin || end(v) <= t.begin, "finetune",
        "--train and --val are the same file and the blocks overlap (train '{}', val '{}'): give "
        "disjoint "
        "ranges, e.g. --val-blocks 26:58 --train-blocks 58:",
        o.train_blocks, o.val_blocks);
}

constexpr const char* k_op = "finetune";

void require_file(const fs::path& p, const char* what) {
  check(!p.empty(), k_op, "no {} given", what);
  check(fs::is_regular_file(p), k_op, "{} '{}' does not exist", what, p.string());
}

at::Device parse_device(const std::string& s) {
  try {
    at::Device d(s);
    check(d.is_cpu() || d.is_cuda(), k_op, "device must be cpu or cuda[:N], got '{}'", s);
    check(!d.is_cuda() || at::hasCUDA(), k_op,
          "device '{}' requested but this LibTorch build has no CUDA", s);
    return d;
  } catch (const c10::Error&) {
    fail(k_op, "device must be cpu or cuda[:N], got '{}'", s);
  }
}

// Blocks of `range` from a text file's token stream, int64 [N, ctx].
at::Tensor text_blocks(const text::Tokenizer& tok, const fs::path& file, int64_t ctx,
                       const std::string& range) {
  const auto ids = tok.encode(text::read_text_file(file), false);
  try {
    return text::make_block_tensor(ids, ctx, text::parse_block_range(range));
  } catch (const Error& e) {
    fail(k_op, "{}: {}", file.string(), e.what());
  }
}

}  // namespace

FinetuneRunResult run_finetune(const FinetuneRunOptions& o, const ProgressFn& progress,
                               const FinetuneHooks& hooks) {
  // ---- validate everything cheap first --------------------------------------------
  const auto& c = o.convert;
  check(!c.out.empty(), k_op, "no output directory given (--out)");
  require_file(o.train_text, "training text");
  require_file(o.val_text, "validation text");
  check_disjoint_blocks(o);
  check(fs::exists(c.model), k_op, "model '{}' does not exist", c.model);
  o.lora.validate();
  const at::Device device = parse_device(o.device);
  model::ModelWeights w = formats::load_model(c.model);
  const auto& cfg = w.config;
  check(o.ctx >= 2, k_op, "ctx must be >= 2, got {}", o.ctx);
  check(o.ctx <= cfg.max_position_embeddings, k_op,
        "ctx {} is longer than the model supports (max_position_embeddings {})", o.ctx,
        cfg.max_position_embeddings);
  FinetuneRunResult res;
  res.plan = convert::plan_conversion(c, cfg.num_layers, cfg.num_kv_heads);
  res.layers = res.plan.layers;
  auto methods = convert::methods_from_calibration(c.calib, w, c.method, res.layers, o.train_kernel,
                                                  c.init, c.window);
  convert::apply_full_heads(methods, res.plan.full_heads);
  const fs::path tok_path = formats::find_tokenizer(c.model, c.tokenizer);
  auto tok = text::load_tokenizer(tok_path);
  FinetuneData data{text_blocks(*tok, o.train_text, o.ctx, o.train_blocks),
                    text_blocks(*tok, o.val_text, o.ctx, o.val_blocks)};
  res.train_blocks = data.train.size(0);
  res.val_blocks = data.val.size(0);

  // ---- build the hybrid model with adapters ---------------------------------------
  model::ModelWeights on_device = w;
  if (!device.is_cpu())
    for (auto& [n, t] : on_device.tensors) t = t.to(device);
  model::TransformerOptions model_options;
  model_options.checkpoint_layers = o.checkpoint_layers;
  model::Transformer model(on_device, model_options);
  adapt::apply_hybrid(model, methods);
  if (!device.is_cpu())
    for (int64_t l : res.layers)
      for (auto p : model.attention(l).parameters()) p.set_data(p.data().to(device));
  auto lora = adapt::LoraAdapters::attach(model, o.lora, o.train.seed);
  const auto kernel = o.train_kernel ? convert::kernel_parameters(model, res.layers)
                                     : std::map<std::string, at::Tensor>{};
  res.lora_parameters = lora.num_parameters();
  for (const auto& [n, t] : kernel) res.kernel_parameters += t.numel();

  res.train = finetune(model, lora, kernel, data, o.train, c.out, o.resume, progress, hooks);
  if (o.train.world && o.train.world->rank() != 0) return res;  // rank 0 exports

  // ---- export the best checkpoint -------------------------------------------------
  const fs::path adapter = c.out / "adapter";
  fs::create_directories(adapter);
  std::map<std::string, at::Tensor> lt;
  for (const auto& [n, t] : lora.named_tensors()) lt[n] = t.detach().to(at::kCPU);
  io::write_safetensors(adapter / "adapter_model.safetensors", lt);
  io::write_file_atomic(adapter / "adapter_config.json", lora.peft_config_json());
  if (!kernel.empty()) {
    std::map<std::string, at::Tensor> kt;
    for (const auto& [n, t] : kernel) kt[n] = t.detach().to(at::kCPU);
    io::write_safetensors(c.out / "kernel_params.safetensors", kt);
  }
  res.model_dir = c.out / "model";
  convert::export_converted(res.model_dir, lora.merged(w), model, c.method, res.layers, c.model,
                            tok_path);

  nlohmann::json j;
  j["model"] = c.model;
  j["calib"] = c.calib.string();
  j["method"] = c.method;
  j["layers"] = res.layers;
  j["layer_range"] = res.plan.range_rule;
  j["init"] = convert::kernel_init_name(c.init);
  j["kernel_start"] = res.plan.from_calibration ? "calibrated" : "initial";
  j["ctx"] = o.ctx;
  j["steps"] = o.train.steps;
  j["updates"] = res.train.steps;
  j["patience"] = o.train.patience;
  j["min_delta"] = o.train.min_delta;
  j["stopped_early"] = res.train.stopped_early;
  j["lora"] = {{"rank", o.lora.rank}, {"alpha", o.lora.alpha}, {"dropout", o.lora.dropout}};
  j["lr"] = o.train.adamw.lr;
  j["train_kernel"] = o.train_kernel;
  j["train_blocks"] = res.train_blocks;
  j["val_blocks"] = res.val_blocks;
  j["lora_parameters"] = res.lora_parameters;
  j["kernel_parameters"] = res.kernel_parameters;
  j["best_step"] = res.train.best_step;
  j["best_val_nll"] = res.train.best_val_nll;
  nlohmann::json val = nlohmann::json::array();
  for (const auto& v : res.train.val_log) val.push_back({{"step", v.step}, {"nll", v.nll}});
  j["val"] = val;
  io::write_file_atomic(c.out / "finetune.json", j.dump(2) + "\n");
  return res;
}

}  // namespace oal::train
