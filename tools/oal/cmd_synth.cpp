// `oal synth`: write a synthetic HF model directory (model/synthetic.h) — a tiny one with
// planted outlier dimensions for tests and demos, or one with Qwen2.5-0.5B's shapes for
// cost and speed measurements at model scale. The weights are random: such a model's
// outputs mean nothing, only its shapes and planted dimensions do.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "oal/core/error.h"
#include "oal/model/synthetic.h"

namespace {

struct SynthArgs {
  std::string shape = "tiny", out, dtype;
  int64_t layers = 0, shards = 1;
  uint64_t seed = 0;
  bool json = false;
};

void run(const SynthArgs& a) {
  oal::model::SyntheticOptions o =
      a.shape == "qwen2.5-0.5b" ? oal::model::qwen25_05b_shape() : oal::model::SyntheticOptions{};
  if (a.layers > 0) o.num_layers = a.layers;
  if (!a.dtype.empty()) o.dtype = a.dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  o.shards = a.shards;
  o.seed = a.seed;
  oal::model::write_synthetic_model(a.out, o);
  const int64_t hd = o.head_dim > 0 ? o.head_dim : o.hidden_size / o.num_heads;
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"out", a.out},
                                      {"shape", a.shape},
                                      {"layers", o.num_layers},
                                      {"heads", o.num_heads},
                                      {"kv_heads", o.num_kv_heads},
                                      {"head_dim", hd},
                                      {"dtype", o.dtype == at::kBFloat16 ? "bf16" : "fp32"},
                                      {"planted_dims", oal::model::synthetic_planted_dims(o)}}
                           .dump(2));
    return;
  }
  fmt::print("wrote a synthetic {} model ({} layers, {} query / {} KV heads of {}, {}; random "
             "weights) to {}\n",
             a.shape, o.num_layers, o.num_heads, o.num_kv_heads, hd,
             o.dtype == at::kBFloat16 ? "bf16" : "fp32", a.out);
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
      app.add_option("--out", a->out, "Directory to write (config.json, safetensors, tokenizer)")
          ->required();
      app.add_option("--layers", a->layers, "Override the number of layers (0: the shape's)")
          ->check(CLI::NonNegativeNumber);
      app.add_option("--dtype", a->dtype, "fp32 | bf16 (default: the shape's)")
          ->check(CLI::IsMember({"fp32", "bf16"}));
      app.add_option("--shards", a->shards, "Safetensors shards (> 1: sharded with an index)")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
      app.add_option("--seed", a->seed, "Generator seed (same seed, same bytes)")
          ->capture_default_str();
      app.add_flag("--json", a->json, "Machine-readable output");
      return [a] { run(*a); };
    }};

}  // namespace
