"""A small Llama written in plain PyTorch with the module tree and call conventions of
HF transformers >= 4.48 (model.model.layers[i].self_attn with q/k/v/o_proj, RoPE
(cos, sin) computed once per forward and passed as position_embeddings, half-split
rotation, GQA), for the oal.convert tests."""
from dataclasses import dataclass

import torch
from torch import nn

import reference as ref


@dataclass
class ToyConfig:
    vocab_size: int = 48
    hidden_size: int = 32
    intermediate_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 8
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    attention_bias: bool = False  # True: Qwen2-style q/k/v bias


def rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, config):
        super().__init__()
        d = config.head_dim
        inv = 1.0 / (config.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq  # [B, T, D/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class Attention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.config, self.layer_idx = config, layer_idx
        self.head_dim = config.head_dim
        h, kv, d, bias = (config.num_attention_heads, config.num_key_value_heads,
                          config.head_dim, config.attention_bias)
        self.q_proj = nn.Linear(config.hidden_size, h * d, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, kv * d, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, kv * d, bias=bias)
        self.o_proj = nn.Linear(h * d, config.hidden_size, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask=None, **kwargs):
        B, T, _ = hidden_states.shape
        shape = (B, T, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        y = ref.softmax_attention(q, k, v)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1)), None


class DecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.self_attn = Attention(config, layer_idx)
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, h, position_embeddings, attention_mask=None):
        a, _ = self.self_attn(hidden_states=self.input_layernorm(h),
                              position_embeddings=position_embeddings,
                              attention_mask=attention_mask)
        h = h + a
        x = self.post_attention_layernorm(h)
        return h + self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i)
                                    for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(config)

    def forward(self, input_ids, attention_mask=None):
        h = self.embed_tokens(input_ids)
        pos = torch.arange(input_ids.shape[1])[None].expand(input_ids.shape[0], -1)
        pe = self.rotary_emb(h, pos)
        for layer in self.layers:
            h = layer(h, pe, attention_mask)
        return self.norm(h)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = Model(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, attention_mask=None):
        return self.lm_head(self.model(input_ids, attention_mask))
