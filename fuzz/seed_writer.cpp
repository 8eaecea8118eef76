// Writes fuzz seeds with the project's own writers, so every seed is a file the CLI
// really produces: kernel JSON, analysis.json, a calibration run directory, a
// fine-tuning checkpoint, plain and converted model directories and GGUF files (a tiny
// synthetic model). Multi-file seeds are packed into the part format of fuzz_input.h.
//   fuzz_seed_writer OUT_DIR   ->   OUT_DIR/<target>/<seed>
#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "fuzz_input.h"
#include "oal/adapt/hybrid.h"
#include "oal/analysis/analysis_json.h"
#include "oal/attention/oal/kernel_json.h"
#include "oal/attention/registry.h"
#include "oal/calib/run_dir.h"
#include "oal/convert/convert.h"
#include "oal/fixtures/synthetic.h"
#include "oal/formats/gguf_export.h"
#include "oal/io/gguf_quants.h"
#include "oal/io/gguf_writer.h"
#include "oal/io/safetensors.h"
#include "oal/text/gguf_tokenizer.h"
#include "oal/train/checkpoint.h"
#include "oal/train/optimizer.h"
#include "oal/train/trainer_state.h"

namespace fs = std::filesystem;
namespace {

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Joins dir / names[i] (an absent file or an empty name as an empty part) into one seed.
void pack(const fs::path& dir, const std::vector<std::string>& names, const fs::path& seed) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += oal::fuzz::k_part_separator;
    if (!names[i].empty() && fs::is_regular_file(dir / names[i])) out += read_bytes(dir / names[i]);
  }
  fs::create_directories(seed.parent_path());
  std::ofstream(seed, std::ios::binary) << out;
}

oal::fixtures::SyntheticOptions tiny_model(oal::fixtures::SyntheticArch arch) {
  oal::fixtures::SyntheticOptions o;
  o.architecture = arch;
  o.hidden_size = 16;
  o.intermediate_size = 24;
  o.num_layers = 2;
  o.num_heads = 2;
  o.num_kv_heads = 1;
  o.max_position_embeddings = 64;
  return o;
}

// Two heads of d = 8 per layer: a bulk group and two single dimensions.
oal::attn::ModelKernels tiny_kernels(int64_t layers) {
  oal::attn::ModelKernels mk;
  mk.head_dim = 8;
  const oal::attn::QuadraticKernel k({{0, 1, 2, 3, 4, 5}, {6}, {7}},
                                     {1.0, 0.1, 0.9, 0.0, 0.2, 1.1, -0.1, 0.0, 0.3, 0.8}, 1e-6);
  for (int64_t l = 0; l < layers; ++l) mk.layers[l] = {k, k};
  mk.meta = {{"source", "fuzz seed"}};
  return mk;
}

void write_kernel_seeds(const fs::path& out) {
  oal::attn::write_kernels(out / "kernel_json" / "ours-2-layers.json", tiny_kernels(2));
}

void write_analysis_seed(const fs::path& out) {
  oal::analysis::AnalysisResult r;
  r.model = "synthetic";
  r.num_layers = 2, r.num_heads = 2, r.num_kv_heads = 1, r.head_dim = 4, r.hidden_size = 8;
  r.top_k = 2, r.ctx = 16;
  r.calibration_lengths = {16, 16};
  r.heldout_lengths = {16};
  oal::analysis::LayerAnalysis l;
  l.layer = 1;
  l.activation = {{0.5, 3.0, 1.0, 0.2, 0.1, 0.3, 0.4, 9.0}, {7, 1, 2}, {9.0, 3.0, 1.0}, 0.45};
  for (int64_t h = 0; h < 2; ++h) {
    oal::analysis::HeadAnalysis a;
    a.head = h, a.kv_head = 0;
    a.chi = {0.1, -0.2, 2.5, 0.3};
    a.chi_per_prompt = {{0.1, -0.1, 2.0, 0.2}, {0.1, -0.3, 3.0, 0.4}};
    a.magnitude = {0.2, 0.3, 2.6, 0.4};
    a.magnitude_per_prompt = a.chi_per_prompt;
    a.score = a.magnitude;
    a.order = {0, 1, 3, 2};
    a.top_dims = {2, 3};
    a.top_share = 0.8, a.gaussian_top_share = 0.5, a.gaussian_real_coords_share = 0.4;
    a.chi_heldout = a.chi;
    a.magnitude_heldout = a.magnitude;
    a.heldout_spearman = 0.9, a.heldout_top_overlap = 2;
    l.heads.push_back(a);
  }
  r.layers = {l};
  oal::analysis::write_analysis(out / "analysis_json" / "two-heads.json", r);
}

const std::vector<std::string> k_run_files = {"calibration.json", "kernels-oal.json",
                                              "kernels-global.json", "baselines.safetensors"};

// A calibration run over both layers of the tiny model with every kind of method.
fs::path write_run_seed(const fs::path& out, const fs::path& scratch) {
  const std::vector<std::string> methods = {"softmax", "global", "oal", "taylorshift",
                                            "performer", "dijiang", "spectraformer"};
  oal::calib::CalibrationResult result;
  result.kernels["oal"] = tiny_kernels(2);
  result.kernels["global"] = tiny_kernels(2);
  for (int64_t layer = 0; layer < 2; ++layer) {
    oal::attn::LayerMethods lm{layer, {}};
    const oal::attn::MethodShape shape{layer, 2, 1, 8};
    for (const auto& m : methods)
      lm.methods[m] = oal::attn::make_method(m, shape, 7,
                                             result.kernels.count(m) ? &result.kernels.at(m) : nullptr);
    result.layers.push_back(lm);
  }
  result.reports.push_back({"oal", "global", 0, 1, 0.5, 0.25, 3, 4, true});
  oal::calib::CalibrationOptions options;
  options.methods = methods;
  options.seed = 7;
  oal::calib::RunInfo info;
  info.model = "synthetic";
  info.text = "text.txt";
  info.ctx = 32;
  const fs::path dir = scratch / "run";
  oal::calib::write_run(dir, result, options, info);
  pack(dir, k_run_files, out / "run_dir" / "all-methods");
  // The same run as the only shard of `--shard 0/1`, which merge-calibration accepts.
  info.shard = oal::calib::Shard{0, 1, {0, 1}};
  oal::calib::write_run(scratch / "run-shard", result, options, info);
  pack(scratch / "run-shard", k_run_files, out / "run_dir" / "one-shard");
  return dir;
}

void write_model_seeds(const fs::path& out, const fs::path& scratch, const fs::path& run) {
  using oal::fixtures::SyntheticArch;
  for (auto arch : {SyntheticArch::llama, SyntheticArch::qwen2}) {
    const auto opts = tiny_model(arch);
    const std::string name = arch == SyntheticArch::llama ? "llama" : "qwen2";
    const fs::path dir = scratch / name;
    oal::fixtures::write_synthetic_model(dir, opts);
    pack(dir, {"config.json", "model.safetensors"}, out / "converted_model" / ("hf-" + name));
    if (arch == SyntheticArch::llama) {  // the same weights as a sharded model (one shard)
      nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
      for (const auto& [tensor, t] : oal::io::read_safetensors(dir / "model.safetensors").tensors)
        index["weight_map"][tensor] = "model.safetensors";
      const fs::path sharded = scratch / "llama-sharded";
      fs::create_directories(sharded);
      fs::copy_file(dir / "config.json", sharded / "config.json", fs::copy_options::overwrite_existing);
      fs::copy_file(dir / "model.safetensors", sharded / "model.safetensors",
                    fs::copy_options::overwrite_existing);
      std::ofstream(sharded / "model.safetensors.index.json") << index.dump();
      pack(sharded, {"config.json", "model.safetensors", "", "", "", "", "model.safetensors.index.json"},
           out / "converted_model" / "hf-llama-sharded");
    }
    fs::create_directories(out / "hf_config");
    fs::copy_file(dir / "config.json", out / "hf_config" / (name + ".json"),
                  fs::copy_options::overwrite_existing);
    // The same model as GGUF (F32 llama with llama.cpp's Q/K order, F16 qwen2) with the
    // synthetic tokenizer as tokenizer.ggml.* metadata.
    fs::create_directories(out / "gguf");
    const auto tokenizer = oal::text::gguf_tokenizer_metadata(oal::text::parse_tokenizer_json(dir / "tokenizer.json"));
    const auto type = arch == SyntheticArch::llama ? oal::io::GgmlType::F32 : oal::io::GgmlType::F16;
    oal::formats::write_gguf_model(out / "gguf" / (name + ".gguf"),
                                   oal::fixtures::make_synthetic_weights(opts),
                                   static_cast<uint32_t>(type), tokenizer);
    // And as Q8_0, which the loader keeps quantized (the quantized kernels' inputs).
    oal::formats::write_gguf_model(out / "gguf" / (name + "-q8_0.gguf"),
                                   oal::fixtures::make_synthetic_weights(opts),
                                   static_cast<uint32_t>(oal::io::GgmlType::Q8_0), tokenizer);
    fs::create_directories(out / "safetensors");
    fs::copy_file(dir / "model.safetensors", out / "safetensors" / (name + ".safetensors"),
                  fs::copy_options::overwrite_existing);
    // The same model with layer 1 converted to OAL from the run above.
    const auto weights = oal::fixtures::make_synthetic_weights(opts);
    oal::model::Transformer model(weights);
    oal::adapt::apply_hybrid(
        model, oal::convert::methods_from_calibration(run, weights, "oal", {1}, false));
    const fs::path conv = scratch / (name + "-converted");
    oal::convert::export_converted(conv, weights, model, "oal", {1}, name, "");
    pack(conv,
         {"config.json", "model.safetensors", "oal_attention/calibration.json",
          "oal_attention/kernels-oal.json", "oal_attention/kernels-global.json",
          "oal_attention/baselines.safetensors"},
         out / "converted_model" / ("converted-" + name));
  }
}

void write_checkpoint_seed(const fs::path& out, const fs::path& scratch) {
  auto a = at::randn({2, 4}).requires_grad_(true);
  auto b = at::zeros({4, 2}).requires_grad_(true);
  oal::train::AdamW opt({a, b});
  a.mutable_grad() = at::ones_like(a);
  b.mutable_grad() = at::ones_like(b);
  opt.step();
  oal::train::Checkpoint c;
  c.step = 1;
  c.tensors = {{"lora.layers.0.q.A", a.detach()}, {"lora.layers.0.q.B", b.detach()}};
  c.optimizer_state = opt.save_state();
  c.state = oal::train::trainer_state_to_json(
      {{{"rank", 2}}, {{1, 2.7, 0.5, 1e-3}}, {{0, 2.9}, {1, 2.5}}, 1, 2.5, 1, false});
  const fs::path dir = scratch / "finetune";
  oal::train::save_checkpoint(dir, c, true, 2.5);
  const std::string step = "checkpoints/step-000001/";
  pack(dir, {"last.json", step + "state.json", step + "trainable.safetensors", step + "optimizer.bin"},
       out / "checkpoint" / "one-step");
}

// A SentencePiece ("llama") vocabulary alone as a GGUF file: <unk>, <s>, </s>, the 256
// byte tokens, then a few pieces with scores, so the fuzzer starts from the SPM path.
void write_spm_tokenizer_seed(const fs::path& out) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    tokens.push_back(name);
    types.push_back(6);
  }
  for (const char* t : {"\xe2\x96\x81", "\xe2\x96\x81t", "he", "\xe2\x96\x81the", "a", "<|user|>"}) {
    tokens.push_back(t);
    types.push_back(1);
  }
  types.back() = 4;
  std::vector<float> scores(tokens.size(), 0.0f);
  for (size_t i = 259; i < scores.size(); ++i) scores[i] = -static_cast<float>(i - 259);
  fs::create_directories(out / "gguf");
  oal::io::write_gguf(out / "gguf" / "spm-tokenizer.gguf",
                      {{"tokenizer.ggml.model", oal::io::gguf_str("llama")},
                       {"tokenizer.ggml.tokens", oal::io::gguf_str_array(tokens)},
                       {"tokenizer.ggml.scores", oal::io::gguf_f32_array(scores)},
                       {"tokenizer.ggml.token_type", oal::io::gguf_i32_array(types)},
                       {"tokenizer.ggml.bos_token_id", oal::io::gguf_u32(1)},
                       {"tokenizer.ggml.eos_token_id", oal::io::gguf_u32(2)}},
                      {});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_seed_writer OUT_DIR\n";
    return 2;
  }
  try {
    const fs::path out = argv[1];
    const fs::path scratch = out / ".scratch";
    fs::remove_all(scratch);
    for (const char* t : {"kernel_json", "analysis_json"}) fs::create_directories(out / t);
    write_kernel_seeds(out);
    write_analysis_seed(out);
    const fs::path run = write_run_seed(out, scratch);
    write_model_seeds(out, scratch, run);
    write_checkpoint_seed(out, scratch);
    write_spm_tokenizer_seed(out);
    fs::remove_all(scratch);
  } catch (const std::exception& e) {
    std::cerr << "fuzz_seed_writer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
