"""``convert``: swap the softmax attention of a Llama/Qwen2-style PyTorch model for OAL.

The module tree it expects (the layout of HF transformers >= 4.48, and of any model
written the same way):

* decoder layers in ``model.model.layers`` or ``model.layers`` (an nn.ModuleList), each
  with a ``self_attn`` module holding Linear ``q_proj``, ``k_proj``, ``v_proj``,
  ``o_proj`` (biases allowed, as Qwen2's q/k/v have) and the head counts as attributes
  (``num_heads`` / ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``) or in
  ``self_attn.config``;
* ``self_attn(hidden_states, position_embeddings=(cos, sin), attention_mask=...)``
  returning ``(output, attention_weights)``, with RoPE applied to q and k before
  attention in HF's half-split layout: ``x * cos + rotate_half(x) * sin``.

The converted module keeps the projections (the same nn.Linear objects, so their
parameters stay shared and trainable) and replaces the softmax by
``QuadraticAttention`` with the layer's kernels; its ``L`` is a new trainable
parameter. Attention is causal over the whole sequence: padding masks and KV caches are
refused (decode with ``QuadraticAttention.prefill`` / ``DecodeState`` instead).
"""
import os

import torch
from torch import nn

from .modules import QuadraticAttention
from .errors import check, fail
from .kernels import ModelKernels, load_kernels

_OP = "oal.convert"


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(q, k, cos, sin):
    """HF-layout RoPE on q [B, H, T, D] and k [B, Hkv, T, D] with cos, sin [B, T, D]
    or [T, D]."""
    if cos.dim() == 2:
        cos, sin = cos[None], sin[None]
    cos, sin = cos.unsqueeze(1).to(q.dtype), sin.unsqueeze(1).to(q.dtype)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _attr(module, *names):
    for n in names:
        if getattr(module, n, None) is not None:
            return int(getattr(module, n))
        cfg = getattr(module, "config", None)
        if cfg is not None and getattr(cfg, n, None) is not None:
            return int(getattr(cfg, n))
    return None


class OalSelfAttention(nn.Module):
    """A Llama/Qwen2 self-attention with OAL instead of softmax (see the module doc)."""

    def __init__(self, attn, kernels, chunk=64):
        super().__init__()
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            check(isinstance(getattr(attn, name, None), nn.Module), _OP,
                  f"attention module {type(attn).__name__} has no {name}; expected a "
                  "Llama/Qwen2-style attention with q_proj, k_proj, v_proj, o_proj")
            setattr(self, name, getattr(attn, name))
        heads = _attr(attn, "num_heads", "num_attention_heads")
        check(heads is not None, _OP, f"{type(attn).__name__} states no num_heads / "
              "num_attention_heads (attribute or config)")
        kv_heads = _attr(attn, "num_key_value_heads") or heads
        head_dim = _attr(attn, "head_dim") or self.q_proj.out_features // heads
        check(self.q_proj.out_features == heads * head_dim, _OP,
              f"q_proj gives {self.q_proj.out_features} features, expected "
              f"{heads} heads x {head_dim}")
        check(self.k_proj.out_features == kv_heads * head_dim, _OP,
              f"k_proj gives {self.k_proj.out_features} features, expected "
              f"{kv_heads} KV heads x {head_dim}")
        check(kernels.heads == heads and kernels.dim == head_dim, _OP,
              f"kernels are for {kernels.heads} heads of d = {kernels.dim}; the layer has "
              f"{heads} heads of d = {head_dim}")
        self.num_heads, self.num_key_value_heads, self.head_dim = heads, kv_heads, head_dim
        self.layer_idx = getattr(attn, "layer_idx", None)
        self.oal = QuadraticAttention.from_kernels(kernels, chunk)

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None,
                past_key_value=None, **kwargs):
        check(position_embeddings is not None, _OP,
              "the converted attention needs position_embeddings=(cos, sin) (RoPE is "
              "applied before attention)")
        check(past_key_value is None, _OP, "KV caches are not supported by the converted "
              "attention; decode with QuadraticAttention.prefill / DecodeState")
        B, T, _ = hidden_states.shape
        _check_causal(attention_mask, T)
        q = self.q_proj(hidden_states).view(B, T, self.num_heads, self.head_dim)
        k = self.k_proj(hidden_states).view(B, T, self.num_key_value_heads, self.head_dim)
        v = self.v_proj(hidden_states).view(B, T, self.num_key_value_heads, self.head_dim)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q, k = apply_rotary(q, k, *position_embeddings)
        y = self.oal(q, k, v)
        y = y.transpose(1, 2).reshape(B, T, self.num_heads * self.head_dim)
        return self.o_proj(y), None


def _check_causal(mask, T):
    """Accepts None or a plain causal mask (bool: True = attend; float: 0 = attend)."""
    if mask is None:
        return
    allowed = mask if mask.dtype == torch.bool else mask == 0
    causal = torch.ones(T, T, dtype=torch.bool, device=mask.device).tril()
    ok = allowed.shape[-2:] == (T, T) and bool((allowed == causal).all())
    check(ok, _OP, "only causal attention over whole sequences is supported; the "
          "attention_mask masks more (padding?) or has another shape "
          f"({list(mask.shape)})")


def _decoder_layers(model):
    for owner in (getattr(model, "model", None), model):
        layers = getattr(owner, "layers", None) if owner is not None else None
        if isinstance(layers, nn.ModuleList):
            return layers
    fail(_OP, f"{type(model).__name__} has no decoder layers (expected model.model.layers "
         "or model.layers, an nn.ModuleList)")


def convert(model, kernels, layers=None, chunk=64):
    """Replaces ``self_attn`` of the given decoder ``layers`` (default: every layer the
    kernels cover) by OalSelfAttention, in place; returns the model. ``kernels``: a
    ModelKernels or a kernel JSON path (our format or the official release)."""
    if isinstance(kernels, (str, os.PathLike)):
        kernels = load_kernels(kernels)
    check(isinstance(kernels, ModelKernels), _OP,
          f"kernels must be ModelKernels or a path, got {type(kernels).__name__}")
    decoder = _decoder_layers(model)
    layers = sorted(kernels.layers) if layers is None else list(layers)
    check(len(layers) > 0, _OP, "no layers to convert")
    for i in layers:
        check(0 <= i < len(decoder), _OP, f"layer {i} is out of range: the model has "
              f"{len(decoder)} layers")
        attn = getattr(decoder[i], "self_attn", None)
        check(attn is not None, _OP, f"decoder layer {i} has no self_attn")
        if isinstance(attn, OalSelfAttention):
            fail(_OP, f"layer {i} is already converted")
        kernel = kernels.layer(i, dtype=next(model.parameters()).dtype)
        decoder[i].self_attn = OalSelfAttention(attn, kernel, chunk)
    return model
