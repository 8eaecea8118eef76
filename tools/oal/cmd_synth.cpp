// `oal synth`: write a synthetic HF model directory (fixtures/synthetic.h) — a tiny one with
// planted outlier dimensions for tests and demos, or one with Qwen2.5-0.5B's shapes for
// cost and speed measurements at model scale. The weights are random: such a model's
// outputs mean nothing, only its shapes and planted dimensions do. With --gguf, the same
// model as one llama.cpp GGUF file instead (matrices Q8_0, F16 or F32, the synthetic
// tokenizer as tokenizer.ggml.* keys): the model llama.cpp and oal run side by side.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/core/error.h"
#include "oal/fixtures/synthetic.h"
#include "oal/fixtures/synthetic_tokenizer.h"
#include "oal/formats/gguf_export.h"
#include "oal/io/gguf_quants.h"

namespace {

struct SynthArgs {
  std::string shape = "tiny", out, dtype, gguf;
  int64_t layers = 0, shards = 1, vocab = 0;
  uint64_t seed = 0;
  bool json = false;
};

void run(const SynthArgs& a) {
  oal::fixtures::SyntheticOptions o = a.shape == "qwen2.5-0.5b" ? oal::fixtures::qwen25_05b_shape()
                                                                : oal::fixtures::SyntheticOptions{};
  if (a.layers > 0) o.num_layers = a.layers;
  if (a.vocab > 0) o.vocab_size = a.vocab;
  if (!a.dtype.empty()) o.dtype = a.dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  o.shards = a.shards;
  o.seed = a.seed;
  oal::check(a.gguf.empty() || a.shards == 1, "synth",
             "--shards {} with --gguf: a GGUF file is written whole; drop --shards", a.shards);
  if (a.gguf.empty()) {
    oal::fixtures::write_synthetic_model(a.out, o);
  } else {
    using oal::io::GgmlType;
    const GgmlType type = a.gguf == "q8_0"  ? GgmlType::Q8_0
                          : a.gguf == "f16" ? GgmlType::F16
                                            : GgmlType::F32;
    const oal::model::ModelWeights w = oal::fixtures::make_synthetic_weights(o);
    oal::formats::write_gguf_model(
        a.out, w, static_cast<uint32_t>(type),
        oal::fixtures::synthetic_gguf_tokenizer_metadata(w.config.vocab_size));
  }
  const int64_t hd = o.head_dim > 0 ? o.head_dim : o.hidden_size / o.num_heads;
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"out", a.out},
                                      {"shape", a.shape},
                                      {"layers", o.num_layers},
                                      {"heads", o.num_heads},
                                      {"kv_heads", o.num_kv_heads},
                                      {"head_dim", hd},
                                      {"dtype", o.dtype == at::kBFloat16 ? "bf16" : "fp32"},
                                      {"gguf", a.gguf},
                                      {"planted_dims", oal::fixtures::synthetic_planted_dims(o)}}
                           .dump(2));
    return;
  }
  fmt::print(
      "wrote a synthetic {} model ({} layers, {} query / {} KV heads of {}, {}; random "
      "weights) to {}\n",
      a.shape, o.num_layers, o.num_heads, o.num_kv_heads, hd,
      a.gguf.empty() ? (o.dtype == at::kBFloat16 ? "bf16" : "fp32") : "GGUF " + a.gguf, a.out);
}

oal::cli::Registrar reg{
    "synth", "Write a synthetic HF model directory (random weights, planted outlier dims)",
    [](CLI::App& app) {
      auto a = std::make_shared<SynthArgs>();
      app.add_option("--shape", a->shape,
                     "tiny (2 layers, hidden 64, for tests) | qwen2.5-0.5b (494M parameters, "
                     "bf16: cost measurements)")
          ->check(CLI::IsMember({"tiny", "qwen2.5-0.5b"}))
          ->capture_default_str();
      app.add_option("--out", a->out,
                     "Directory to write (config.json, safetensors, tokenizer), or the .gguf "
                     "file with --gguf")
          ->required();
      app.add_option("--layers", a->layers, "Override the number of layers (0: the shape's)")
          ->check(CLI::NonNegativeNumber);
      app.add_option("--vocab", a->vocab,
                     "Override the vocabulary size (0: the shape's; at least the synthetic "
                     "tokenizer's tokens)")
          ->check(CLI::NonNegativeNumber);
      app.add_option("--dtype", a->dtype, "fp32 | bf16 (default: the shape's)")
          ->check(CLI::IsMember({"fp32", "bf16"}));
      app.add_option("--shards", a->shards, "Safetensors shards (> 1: sharded with an index)")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
      app.add_option("--seed", a->seed, "Generator seed (same seed, same bytes)")
          ->capture_default_str();
      app.add_option("--gguf", a->gguf,
                     "Write one llama.cpp GGUF file to --out instead of an HF directory, its "
                     "matrices as q8_0, f16 or f32 (norms f32)")
          ->check(CLI::IsMember({"q8_0", "f16", "f32"}));
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
