// `oal bench`: prefill and decode speed of attention methods side by side (paper Fig. 3).
#include <ATen/Parallel.h>
#include <fmt/core.h>

#include <cstdlib>

#include "command.h"
#include "oal/bench/bench.h"
#include "oal/bench/model_bench.h"
#include "oal/bench/train_bench.h"
#include "oal/core/error.h"
#include "oal/core/machine.h"
#include "oal/core/ranges.h"
#include "oal/fixtures/synthetic.h"
#include "oal/formats/load.h"
#include "oal/io/atomic_file.h"
#include "oal/simd/gemm_choice.h"
#include "oal/simd/isa.h"
#include "progress_bar.h"
#include "weights_option.h"

namespace {

struct BenchArgs {
  std::string methods = "softmax-flash,softmax-torch,oal,global";
  std::string lengths = "1024,2048,4096,8192,16384,32768";
  std::string dtypes = "bf16,fp32";
  std::string mode = "both", format = "md", out, out_svg, simd, gemm;
  int repeats = 3, warmup = 1, threads = 0, decode_steps = 32;
  int64_t chunk = 64, groups = 5, heads = 14, kv_heads = 2, dim = 64;
  int64_t chunked_train_from = oal::attn::k_default_chunked_train_from;
  bool checkpoint_layers = false;
  oal::attn::Window window;
  double max_call_seconds = 60;
  bool json = false, quiet = false, interleave = false;
  // --model: the model-level benchmark (bench/model_bench.h).
  std::string model, variants = "softmax,oal,hybrid", prefill_lengths = "1024,4096";
  std::string hybrid_layers = "default";
  oal::model::TransformerOptions weights;
  // --train: LoRA updates of the --model (bench/train_bench.h).
  bool train = false, freeze_kernel = false;
};

// A synthetic checkpoint with Qwen2.5-0.5B's shapes (speed only depends on shapes).
oal::model::ModelWeights qwen05b_shaped() {
  return oal::fixtures::make_synthetic_weights(oal::fixtures::qwen25_05b_shape());
}

oal::bench::BenchConfig to_config(const BenchArgs& a) {
  oal::bench::BenchConfig c;
  c.methods = oal::split_names(a.methods);
  c.lengths.clear();
  for (const auto& n : oal::split_names(a.lengths)) {
    try {
      c.lengths.push_back(std::stoll(n));
    } catch (const std::exception&) {
      oal::fail("bench", "--n: '{}' is not an integer", n);
    }
  }
  c.dtypes.clear();
  for (const auto& d : oal::split_names(a.dtypes)) {
    if (d == "bf16") c.dtypes.push_back(at::kBFloat16);
    else if (d == "fp32") c.dtypes.push_back(at::kFloat);
    else oal::fail("bench", "--dtype: '{}', expected bf16 and/or fp32", d);
  }
  oal::check(a.mode == "prefill" || a.mode == "decode" || a.mode == "both" || a.mode == "train",
             "bench", "--mode: '{}', expected prefill, decode, both or train", a.mode);
  c.train = a.mode == "train";
  c.prefill = a.mode == "prefill" || a.mode == "both";
  c.decode = a.mode == "decode" || a.mode == "both";
  c.repeats = a.repeats;
  c.warmup = a.warmup;
  c.decode_steps = a.decode_steps;
  c.interleave_decode = a.interleave;
  c.max_call_seconds = a.max_call_seconds;
  c.shape.chunk = a.chunk;
  c.shape.oal_groups = a.groups;
  c.shape.q_heads = a.heads;
  c.shape.kv_heads = a.kv_heads;
  c.shape.dim = c.shape.value_dim = a.dim;
  c.shape.window = a.window;
  c.shape.window.validate("bench");
  c.shape.chunked_train_from = a.chunked_train_from;
  oal::check(a.chunked_train_from >= 1, "bench", "--chunked-train-from must be >= 1, got {}",
             a.chunked_train_from);
  return c;
}

std::vector<int64_t> parse_lengths(const std::string& list, const char* option) {
  std::vector<int64_t> out;
  for (const auto& n : oal::split_names(list)) {
    try {
      out.push_back(std::stoll(n));
    } catch (const std::exception&) {
      oal::fail("bench", "{}: '{}' is not an integer", option, n);
    }
  }
  return out;
}

std::string model_report(const BenchArgs& a, const oal::ProgressFn& progress) {
  const bool synthetic = a.model == "synthetic:qwen2.5-0.5b";
  const auto weights =
      synthetic ? qwen05b_shaped() : oal::formats::load_model(a.model, {.keep_quantized = true});
  oal::model::Transformer model(weights, a.weights);
  oal::bench::ModelBenchConfig c;
  c.variants = oal::split_names(a.variants);
  c.prefill_lengths = parse_lengths(a.prefill_lengths, "--prefill-n");
  c.decode_contexts = parse_lengths(a.lengths, "--n");
  c.hybrid_layers = a.hybrid_layers;
  c.repeats = a.repeats;
  c.warmup = a.warmup;
  c.decode_steps = a.decode_steps;
  c.chunk = a.chunk;
  c.groups = a.groups;
  c.window = a.window;
  const std::string what =
      (synthetic ? "Qwen2.5-0.5B-shaped synthetic checkpoint (bf16 weights)" : a.model) +
      std::string(a.weights.rowwise_decode ? "" : ", decode layers as tensor operations") +
      (a.window.none() ? std::string() : ", OAL layers windowed (" + a.window.describe() + ")");
  const auto rep = oal::bench::run_model_bench(model, what, c, progress);
  return a.format == "json"  ? oal::bench::model_bench_json(rep)
         : a.format == "csv" ? oal::bench::model_bench_csv(rep)
                             : oal::bench::model_bench_markdown(rep);
}

// --train: the model as `oal finetune` holds it (every weight fp32), its variants timed
// by bench/train_bench.h.
std::string train_report(const BenchArgs& a, bool lengths_given, const oal::ProgressFn& progress) {
  oal::model::TransformerOptions o = a.weights;
  o.weights = oal::model::WeightFormat::f32;
  o.checkpoint_layers = a.checkpoint_layers;
  oal::model::Transformer model(oal::formats::load_model(a.model), o);
  oal::bench::TrainBenchConfig c;
  c.variants = oal::split_names(a.variants);
  c.hybrid_layers = a.hybrid_layers;
  c.window = a.window;
  c.chunk = a.chunk;
  c.groups = a.groups;
  if (lengths_given) c.contexts = parse_lengths(a.lengths, "--n");
  c.repeats = a.repeats;
  c.warmup = a.warmup;
  c.train_kernel = !a.freeze_kernel;
  c.chunked_train_from = a.chunked_train_from;
  c.checkpoint_layers = a.checkpoint_layers;
  const auto rep = oal::bench::run_train_bench(model, a.model, c, progress);
  return a.format == "json" ? oal::bench::train_bench_json(rep)
                            : oal::bench::train_bench_markdown(rep);
}

void run(BenchArgs a, bool lengths_given) {
  if (a.json) a.format = "json";
  oal::check(a.format == "md" || a.format == "csv" || a.format == "json", "bench",
             "--format: '{}', expected md, csv or json", a.format);
  if (a.threads > 0) oal::configure_threads(a.threads);
  namespace simd = oal::simd;
  if (!a.simd.empty() && a.simd != "auto") simd::force_target(simd::parse_target(a.simd));
  // --train times the update `oal finetune` runs, and finetune pins oal's own GEMM
  // (main.cpp) unless OAL_GEMM says otherwise; --gemm below still overrides.
  const char* gemm_env = std::getenv("OAL_GEMM");
  if (a.train && (gemm_env == nullptr || *gemm_env == '\0'))
    simd::set_gemm_policy(simd::GemmPolicy::own);
  if (a.gemm == "own")
    simd::set_gemm_policy(simd::GemmPolicy::own);
  else if (a.gemm == "blas")
    simd::set_gemm_policy(simd::GemmPolicy::blas);
  else
    oal::check(a.gemm.empty() || a.gemm == "auto", "bench",
               "--gemm: '{}', expected own, blas or auto", a.gemm);
  oal::check(!a.train || !a.model.empty(), "bench", "--train needs --model (the model to adapt)");
  oal::check(!a.train || a.format != "csv", "bench", "--train writes md or json, not csv");
  if (!a.model.empty()) {
    oal::cli::ProgressBar bar("bench", !a.quiet);
    const std::string text =
        a.train ? train_report(a, lengths_given, bar.fn()) : model_report(a, bar.fn());
    bar.finish();
    if (!a.out.empty()) oal::io::write_file_atomic(a.out, text);
    else fmt::print("{}", text);
    return;
  }
  const auto cfg = to_config(a);
  oal::cli::ProgressBar bar("bench", !a.quiet);
  const auto rep = oal::bench::run_bench(cfg, bar.fn());
  bar.finish();
  const std::string text = a.format == "json" ? oal::bench::bench_json(rep)
                           : a.format == "csv" ? oal::bench::bench_csv(rep)
                                               : oal::bench::bench_markdown(rep);
  if (!a.out.empty()) oal::io::write_file_atomic(a.out, text);
  else fmt::print("{}", text);
  if (!a.out_svg.empty()) oal::io::write_file_atomic(a.out_svg, oal::bench::bench_svg(rep));
}

oal::cli::Registrar reg{
    "bench", "Time causal attention methods (prefill and per-token decode) side by side",
    [](CLI::App& app) {
      auto a = std::make_shared<BenchArgs>();
      std::string known;
      for (const auto& n : oal::bench::bench_method_names())
        known += (known.empty() ? "" : ", ") + n;
      app.add_option("--methods", a->methods, "Comma-separated methods (" + known + ")")
          ->capture_default_str();
      app.add_option("--n", a->lengths, "Comma-separated sequence / context lengths")
          ->capture_default_str();
      app.add_option("--dtype", a->dtypes, "bf16 and/or fp32 (comma-separated)")
          ->capture_default_str();
      app.add_option("--mode", a->mode,
                     "prefill, decode or both; train: forward and backward of one layer (fp32) "
                     "as fine-tuning runs it")
          ->capture_default_str();
      app.add_option("--repeats", a->repeats, "Timed calls per cell")->capture_default_str();
      app.add_option("--warmup", a->warmup, "Untimed calls before them")->capture_default_str();
      app.add_option("--decode-steps", a->decode_steps, "Timed tokens per decode cell")
          ->capture_default_str();
      app.add_flag("--interleave", a->interleave,
                   "Decode: step every method at one N in turn (token by token) so that a "
                   "noisy machine's slow spells fall on all of them alike; no peak memory");
      app.add_option("--threads", a->threads, "Intra-op threads (0 = $OAL_THREADS or all cores)")
          ->capture_default_str();
      app.add_option("--chunk", a->chunk, "OAL chunk size")->capture_default_str();
      app.add_option("--chunked-train-from", a->chunked_train_from,
                     "With --train or --mode train: sequences of at least this many tokens train "
                     "the OAL layers through the linear-time chunked form, shorter ones through "
                     "the pairwise kernel")
          ->capture_default_str();
      app.add_option("--sinks", a->window.sinks,
                     "Sink tokens of the windowed rows (oal+window, global+window, window)")
          ->capture_default_str();
      app.add_option("--window", a->window.recent,
                     "Recent-window tokens of the windowed rows (>= 1 to time them)")
          ->capture_default_str();
      app.add_option("--simd", a->simd,
                     "Force the kernels' SIMD target (avx512, avx2, sse4, scalar; default: the "
                     "best this CPU runs; same as OAL_SIMD)");
      app.add_option("--gemm", a->gemm,
                     "GEMM backend inside the kernels: own, blas or auto (default; same as "
                     "OAL_GEMM)");
      app.add_option("--groups", a->groups, "Groups of the 'oal' method")->capture_default_str();
      app.add_option("--heads", a->heads, "Query heads (paper App. E: 14)")->capture_default_str();
      app.add_option("--kv-heads", a->kv_heads, "Key/value heads (paper App. E: 2)")
          ->capture_default_str();
      app.add_option("--dim", a->dim, "Head dimension d = dv (paper App. E: 64)")
          ->capture_default_str();
      app.add_option("--max-call-seconds", a->max_call_seconds,
                     "Skip a cell whose call is predicted to take longer")
          ->capture_default_str();
      app.add_option("--format", a->format, "md, csv or json")->capture_default_str();
      app.add_flag("--json", a->json, "Same as --format json");
      app.add_option("--out", a->out, "Write the table to this file instead of stdout");
      app.add_option("--out-svg", a->out_svg, "Also write a Fig. 3-style SVG plot here");
      app.add_flag("--quiet", a->quiet, "No progress bar");
      app.add_option("--model", a->model,
                     "Benchmark a whole model instead (HF directory, .gguf file, llama2.c .bin, or "
                     "synthetic:qwen2.5-0.5b): prefill tokens/s and per-token decode latency "
                     "of the softmax model, all layers OAL and the hybrid; --n sets the "
                     "decode contexts");
      app.add_option("--variants", a->variants, "With --model: softmax, oal and/or hybrid")
          ->capture_default_str();
      app.add_option("--prefill-n", a->prefill_lengths, "With --model: prompt lengths timed")
          ->capture_default_str();
      app.add_option("--hybrid-layers", a->hybrid_layers,
                     "With --model: converted layers of the hybrid (e.g. 3-20; default: the "
                     "paper's range rule, adapt/hybrid.h)")
          ->capture_default_str();
      oal::cli::add_weights_option(app, a->weights);
      oal::cli::add_ubatch_option(app, a->weights);
      app.add_option_function<std::string>(
             "--decode-layer",
             [a](const std::string& v) { a->weights.rowwise_decode = v == "rows"; },
             "With --model: decode steps run each layer on raw rows (rows, the default; "
             "model/decode_layer.h) or as tensor operations (tensors, the reference path)")
          ->check(CLI::IsMember({"rows", "tensors"}))
          ->default_str("rows");
      app.add_flag("--checkpoint-layers", a->checkpoint_layers,
                   "With --train: recompute each layer's activations in the backward (as "
                   "oal finetune --checkpoint-layers)");
      app.add_flag("--train", a->train,
                   "With --model: time LoRA updates instead (the trainer of oal finetune: "
                   "tokens/s, forward / backward / optimizer split, peak memory); --n sets the "
                   "block lengths (default 512,1024,2048,4096), --repeats / --warmup the updates");
      app.add_flag("--freeze-kernel", a->freeze_kernel,
                   "With --train: LoRA only (the converted layers' kernel parameters fixed)");
      return [a, n = app.get_option("--n")] { run(*a, n->count() > 0); };
    }};

}  // namespace
