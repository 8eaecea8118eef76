#pragma once
// Hugging Face config.json ↔ ModelConfig for LlamaForCausalLM and Qwen2ForCausalLM.
//
// Required keys: architectures (or model_type), hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, vocab_size. Optional with HF defaults:
// num_key_value_heads (= heads), head_dim (= hidden / heads), max_position_embeddings
// (Llama 2048, Qwen2 32768), rope_theta 10000 (also read from "rope_parameters"),
// rms_norm_eps 1e-6, tie_word_embeddings false, attention_bias (Llama key; Qwen2 always
// has q/k/v biases), rope_scaling (null, "default" or rope_type/type "llama3"),
// bos_token_id, eos_token_id (an id or a list of ids). Features the transformer does
// not implement (mlp_bias, a hidden_act other than silu, other rope scalings, sliding
// windows) are rejected instead of silently ignored.
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "oal/model/config.h"

namespace oal::formats {

// Parses an already-loaded config.json; `source` names it in error messages.
model::ModelConfig parse_hf_config(const nlohmann::json& j, const std::string& source);

// Reads and parses `path` (a config.json file).
model::ModelConfig read_hf_config(const std::filesystem::path& path);

// HF's llama3 rope_scaling object (also in `oal info --json`).
nlohmann::json rope_scaling_to_json(const model::RopeScaling& scaling);

// The config.json object for `config` (half-layout RoPE only: llama2.c's adjacent
// layout has no HF equivalent).
nlohmann::json hf_config_to_json(const model::ModelConfig& config);

// Writes hf_config_to_json(config) with `extra` keys merged in, atomically.
void write_hf_config(const std::filesystem::path& path, const model::ModelConfig& config,
                     const nlohmann::json& extra);

// Checks the internal consistency of `config` (positive sizes, heads divide, even
// head_dim, ...); throws oal::Error("[<op>] <source>: ...").
void validate_config(const model::ModelConfig& config, const std::string& op,
                     const std::string& source);

}  // namespace oal::formats
