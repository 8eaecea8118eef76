#pragma once
// --weights auto|f32|stored|bf16|q8_0 (how a model's weights are held; model/weight_format.h),
// its older spelling --keep-dtype (= --weights stored), --kv-cache f32|f16|q8_0 (the softmax
// layers' KV cache) and --quant-dot dequant|int8 (simd/linear_quant.h), shared by generate, ppl,
// serve and bench --model; --ubatch (how a prompt is prefilled) for generate and bench --model
// (serve slices prompts itself,
// --prefill-chunk).
#include <CLI/CLI.hpp>

#include "oal/model/transformer.h"
#include "oal/simd/linear_quant.h"

namespace oal::cli {

inline void add_weights_option(CLI::App& app, model::TransformerOptions& o) {
  app.add_option_function<std::string>(
         "--weights",
         [&o](const std::string& name) { o.weights = model::parse_weight_format(name); },
         "How weights are held: auto = quantized GGUF tensors as stored (Q4_1, Q8_0, ... run by "
         "the quantized kernels), float ones as fp32; f32 = all fp32; stored = bf16/f16 kept too "
         "(read as stored by the kernels); bf16; q8_0 = convert to Q8_0 (8.5 bits per weight)")
      ->check(CLI::IsMember({"auto", "f32", "stored", "bf16", "q8_0"}))
      ->default_str("auto");
  app.add_flag_callback(
      "--keep-dtype", [&o] { o.weights = model::WeightFormat::stored; },
      "Same as --weights stored (kept for older scripts)");
  app.add_option_function<std::string>(
         "--kv-cache",
         [&o](const std::string& name) { o.kv_cache = attn::parse_kv_cache_type(name); },
         "KV cache of the softmax layers: f32 (exact), f16 (half the memory per cached token, "
         "llama.cpp's default; keys and values rounded to half precision) or q8_0 (8.5 bits per "
         "value, rounded per 32 values; head dimensions multiples of 32)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}))
      ->default_str("f32");
  // The flag wins over OAL_QUANT_DOT (CLI11 reads the variable only when the flag is absent).
  app.add_option_function<std::string>(
         "--quant-dot",
         [&o](const std::string& name) { o.quant_dot = simd::parse_quant_dot(name); },
         "How a decode step multiplies Q8_0/Q4_0/Q4_1 weights: dequant (each block widened to "
         "fp32, activations exact) or int8 (activations rounded to int8 per 32 values and "
         "integer dot products, as llama.cpp does)")
      ->check(CLI::IsMember({"dequant", "int8"}))
      ->envname("OAL_QUANT_DOT")
      ->default_str("dequant");
}

// --ubatch, 512 (llama.cpp's default) unless the user says otherwise (default_val
// assigns it to o.ubatch when the option is added).
inline void add_ubatch_option(CLI::App& app, model::TransformerOptions& o) {
  app.add_option("--ubatch", o.ubatch,
                 "Prefill a prompt in ubatches of this many tokens, each through every layer "
                 "before the next (activations O(ubatch), as llama.cpp); 0 = the whole prompt "
                 "at once")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->default_val(512);
}

}  // namespace oal::cli
