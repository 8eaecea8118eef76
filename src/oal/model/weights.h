#pragma once
// A loaded checkpoint: its architecture and every tensor under its Hugging Face name
// ("model.embed_tokens.weight", "model.layers.3.self_attn.q_proj.weight", ...,
// "lm_head.weight" unless tied). llama2.c checkpoints are mapped onto the same names
// (with ModelConfig::rope_style = adjacent), so the transformer sees one layout.
// Linear weights are [out_features, in_features] as in nn.Linear.
// dtype: as stored (fp32, bf16 or fp16); the transformer computes in fp32.
// `quantized`: tensors kept in a ggml block type (a GGUF file loaded with
// LoadOptions::keep_quantized): the 2-D projection and embedding weights; such a name is
// in `quantized` instead of `tensors`.
#include <ATen/ATen.h>

#include <map>
#include <string>

#include "oal/model/config.h"
#include "oal/model/quant_weight.h"

namespace oal::model {

struct ModelWeights {
  ModelConfig config;
  std::map<std::string, at::Tensor> tensors;
  std::map<std::string, QuantWeight> quantized;
};

}  // namespace oal::model
