"""Plain PyTorch references the tests compare the C++ ops against: written from the
formulas (DESIGN.md §1), O(T^2), fp64, no chunking, no state."""
import math

import torch


def oal_weights(q, k, group_of, L, eps):
    """kappa(q_i, k_j) = eps + ||L^T [1, s_1..s_G]||^2 for all pairs, q [B, Hq, T, D],
    k [B, Hq, S, D] (KV heads already repeated) -> [B, Hq, T, S]."""
    d = q.shape[-1]
    n = L.shape[-1]
    onehot = torch.nn.functional.one_hot(group_of, n - 1).to(q.dtype)  # [Hq, D, G]
    x = q.unsqueeze(3) * k.unsqueeze(2) / math.sqrt(d)                # [B, Hq, T, S, D]
    s = torch.einsum("bhtsd,hdg->bhtsg", x, onehot)
    sbar = torch.cat([torch.ones_like(s[..., :1]), s], dim=-1)        # [B, Hq, T, S, n]
    z = torch.einsum("bhtsi,hij->bhtsj", sbar, torch.tril(L).to(q.dtype))
    return eps + (z * z).sum(-1)


def repeat_kv(k, q_heads):
    return k.repeat_interleave(q_heads // k.shape[1], dim=1)


def causal_mask(T, S, device=None):
    """True where query i (the last T of S positions) may see key j."""
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(S - T)


def oal_attention(q, k, v, group_of, L, eps):
    Hq = q.shape[1]
    k, v = repeat_kv(k, Hq), repeat_kv(v, Hq)
    w = oal_weights(q, k, group_of, L, eps)
    w = w.masked_fill(~causal_mask(q.shape[2], k.shape[2]), 0.0)
    return (w @ v) / w.sum(-1, keepdim=True)


def softmax_attention(q, k, v, scale=None):
    Hq = q.shape[1]
    k, v = repeat_kv(k, Hq), repeat_kv(v, Hq)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(~causal_mask(q.shape[2], k.shape[2]), float("-inf"))
    return torch.softmax(s, -1) @ v


def windowed_attention(q, k, v, group_of, L, eps, log_scale, sinks, window):
    """The windowed formula pairwise: exp(s - c_h) on the sinks and the last `window` keys
    of each query, the OAL weight on the older ones, one normaliser (fp64 in, fp64 out).
    group_of = L = None: no kernel part."""
    Hq, T = q.shape[1], q.shape[2]
    kr, vr = repeat_kv(k, Hq), repeat_kv(v, Hq)
    s = (q @ kr.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    i = torch.arange(T).unsqueeze(1)
    j = torch.arange(T).unsqueeze(0)
    exact = (j <= i) & ((j < sinks) | (i - j < window))
    linear = (j <= i) & ~exact
    logw = torch.where(exact, s - log_scale.view(1, Hq, 1, 1), torch.full_like(s, float("-inf")))
    if L is not None:
        logk = oal_weights(q, kr, group_of, L, eps).log()
        logw = torch.where(linear, logk, logw)
    return torch.softmax(logw, -1) @ vr


def random_kernels(heads, d, max_groups, dtype=torch.float64, generator=None):
    """Random per-head groups (1..max_groups groups, none empty) and L with a positive
    diagonal of moderate size (weights stay O(1) for O(1) inputs)."""
    group_of = torch.empty(heads, d, dtype=torch.int64)
    n = max_groups + 1
    L = torch.zeros(heads, n, n, dtype=dtype)
    for h in range(heads):
        g = 1 + h % max_groups
        perm = torch.randperm(d, generator=generator)
        labels = torch.arange(d) % g   # every group gets at least one dimension
        group_of[h, perm] = labels
        Lh = torch.randn(g + 1, g + 1, generator=generator, dtype=dtype).tril() * 0.3
        Lh.diagonal().copy_(0.5 + torch.rand(g + 1, generator=generator, dtype=dtype))
        L[h, :g + 1, :g + 1] = Lh
    return group_of, L
