"""Functional OAL and softmax attention: thin wrappers over ``torch.ops.oal.*``.

Shapes (heads first, row-major): q [B, Hq, T, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv],
Hq a multiple of Hkv (query head h reads KV head h // (Hq // Hkv)); y [B, Hq, T, Dv] in
q's dtype. Kernels of one layer: ``group_of`` [Hq, D] int64 (group 0..G_h-1 of every
dimension), ``L`` [Hq, Gmax+1, Gmax+1] lower-triangular, ``eps`` > 0;
kappa(q, k) = eps + ||L^T [1, s_1, .., s_G]||^2 with s_g the sum of q_r k_r / sqrt(D)
over the dimensions r of group g.

The HD state (paper Eq. 5) is a tensor S [B, Hkv, Df, Dv+1], Df = 1 + D + D(D+1)/2,
fp32 (fp64 for fp64 inputs); docs/python.md shows its layout. All ops are functional:
a state passed in is never modified, the new one is returned.

Forward runs the C++ fast path (the CPU kernels for fp32/bf16 CPU tensors, else the
ATen code); backward re-evaluates with the differentiable ATen code, so q, k, v, L and
the state get gradients. ``simd_path`` tells which forward path inputs take.
"""
import torch

from .errors import translated


def feature_dim(d):
    """Df = 1 + d + d(d+1)/2, the HD state's feature rows (2145 for d = 64)."""
    return 1 + d + d * (d + 1) // 2


def empty_state(batch, kv_heads, dim, value_dim, dtype=torch.float32, device="cpu"):
    """An all-zero HD state [batch, kv_heads, Df, value_dim + 1] (fp32 or fp64)."""
    return torch.zeros(batch, kv_heads, feature_dim(dim), value_dim + 1, dtype=dtype,
                       device=device)


@translated
def attention(q, k, v, group_of, L, eps=1e-6, chunk=64, state=None):
    """Causal OAL attention of T tokens (chunked prefill), continuing ``state`` when
    given. Returns (y [B, Hq, T, Dv], state after the last token)."""
    return torch.ops.oal.attention(q, k, v, group_of, L, float(eps), int(chunk), state)


@translated
def step(q, k, v, group_of, L, eps, state):
    """One decode step: q [B, Hq, D], k [B, Hkv, D], v [B, Hkv, Dv] after everything in
    ``state``. Returns (y [B, Hq, Dv], the state with the token absorbed)."""
    return torch.ops.oal.step(q, k, v, group_of, L, float(eps), state)


@translated
def windowed_attention(q, k, v, group_of, L, log_scale, sinks, window, eps=1e-6, chunk=64):
    """Windowed OAL (docs/operator.md "Windowed evaluation"): exact softmax weights on the
    first ``sinks`` tokens and the last ``window`` tokens of each query (itself included),
    the OAL kernel for every older key, under one normaliser; ``log_scale`` [Hq] is the
    per-head log-scale c_h of the exact part. ``group_of = L = None`` gives the
    windowed-only method. Differentiable w.r.t. q, k, v, L and log_scale; without
    gradients fp32/bf16 CPU inputs take the CPU kernels. Returns y [B, Hq, T, Dv]."""
    return torch.ops.oal.windowed_attention(q, k, v, group_of, L, float(eps), log_scale,
                                            int(sinks), int(window), int(chunk))


@translated
def softmax_attention(q, k, v, scale=None):
    """Exact causal softmax attention (flash CPU kernel forward), GQA; k and v may be
    longer than q (S >= T: the queries are the last T positions)."""
    return torch.ops.oal.softmax_attention(q, k, v, None if scale is None else float(scale))


@translated
def simd_path(q, k, v, state=None):
    """The forward path these inputs take: "simd (<simd target>)" or
    "reference (<why not the SIMD path>)"."""
    return torch.ops.oal.simd_path(q, k, v, state)


def kernel_path(q, k, v, state=None):
    """Deprecated name of :func:`simd_path` (in 0.1.0 "kernel" meant both the paper's
    kernel and the SIMD code); warns and forwards."""
    import warnings
    warnings.warn("oal.kernel_path is deprecated; use oal.simd_path", DeprecationWarning,
                  stacklevel=2)
    return simd_path(q, k, v, state)


@translated
def reference(q, k, v, group_of, L, eps=1e-6, kind="pairwise"):
    """The C++ references: "pairwise" (O(T^2)), "recurrent" (token by token, Eq. 5-6)
    or "aten" (the chunked ATen code). Returns y."""
    return torch.ops.oal.reference(q, k, v, group_of, L, float(eps), kind)
