#pragma once
// The tensors a ModelConfig implies, under Hugging Face names, with their shapes
// (nn.Linear weights are [out_features, in_features]):
//   model.embed_tokens.weight                      [vocab, hidden]
//   model.layers.{i}.input_layernorm.weight        [hidden]
//   model.layers.{i}.self_attn.q_proj.weight       [heads * head_dim, hidden]
//   model.layers.{i}.self_attn.k_proj.weight       [kv_heads * head_dim, hidden]
//   model.layers.{i}.self_attn.v_proj.weight       [kv_heads * head_dim, hidden]
//   model.layers.{i}.self_attn.{q,k,v}_proj.bias   [..._proj rows]   (attention_bias)
//   model.layers.{i}.self_attn.o_proj.weight       [hidden, heads * head_dim]
//   model.layers.{i}.post_attention_layernorm.weight [hidden]
//   model.layers.{i}.mlp.gate_proj.weight          [intermediate, hidden]
//   model.layers.{i}.mlp.up_proj.weight            [intermediate, hidden]
//   model.layers.{i}.mlp.down_proj.weight          [hidden, intermediate]
//   model.norm.weight                              [hidden]
//   lm_head.weight                                 [vocab, hidden]   (unless tied)
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "oal/model/config.h"
#include "oal/model/weights.h"

namespace oal::formats {

// Name → expected shape for every tensor of `config`.
std::map<std::string, std::vector<int64_t>> expected_tensor_shapes(
    const model::ModelConfig& config);

// Checks that `weights` holds exactly the expected tensors (none missing, none
// unexpected) with the expected shapes, floating dtype fp32/bf16/fp16, on CPU.
// Errors: "[load] <source>: tensor 'x': expected [64, 64], file has [64, 32]".
void validate_weights(const model::ModelWeights& weights, const std::string& source);

}  // namespace oal::formats
