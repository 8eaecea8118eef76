"""OAL kernels: one per (layer, query head), read from kernel JSON files.

``load_kernels(path)`` reads our format ("oal-kernels", docs/formats.md) and the
official release layout of the paper's authors (e.g. their Qwen2.5-0.5B coefficients);
the C++ core parses and validates both (src/oal/attention/oal/kernel_json.h).
"""
import json
import os
from dataclasses import dataclass, field

import torch

from .errors import check, fail, translated


@dataclass
class HeadKernel:
    """One head: ``groups`` (lists of dimension indices, a partition of 0..d-1; group g
    is matrix index g+1 of L), ``L`` dense lower-triangular [G+1, G+1] fp64, ``eps``."""
    groups: list
    L: torch.Tensor
    eps: float = 1e-6

    @property
    def dim(self):
        return sum(len(g) for g in self.groups)


def _pack_to_dense(packed, n):
    L = torch.zeros(n, n, dtype=torch.float64)
    rows, cols = torch.tril_indices(n, n)
    L[rows, cols] = torch.tensor(packed, dtype=torch.float64)
    return L


@translated
def taylor_lower(num_groups, eps=1e-6):
    """L [G+1, G+1] fp64 of the Taylor kernel 1 + s + s^2/2 for G groups (paper App. D:
    M00 = 1 - eps, M0g = 1/2, Mgh = 1/2, so kappa is the same for every partition), from
    the C++ core's QuadraticKernel::taylor (0 < eps < 1/2)."""
    return torch.ops.oal.taylor_lower(int(num_groups), float(eps))


@dataclass
class LayerKernels:
    """All query heads of one layer, batched as the ops take them: ``group_of``
    [Hq, d] int64, ``L`` [Hq, Gmax+1, Gmax+1] (heads with fewer groups zero-padded:
    an empty group changes no kernel value), one ``eps``."""
    group_of: torch.Tensor
    L: torch.Tensor
    eps: float = 1e-6

    @property
    def heads(self):
        return self.group_of.shape[0]

    @property
    def dim(self):
        return self.group_of.shape[1]

    @staticmethod
    def from_heads(heads, dtype=torch.float64):
        op = "LayerKernels.from_heads"
        check(len(heads) > 0, op, "expected at least one head kernel")
        d, eps = heads[0].dim, heads[0].eps
        gmax = max(len(h.groups) for h in heads)
        group_of = torch.full((len(heads), d), -1, dtype=torch.int64)
        L = torch.zeros(len(heads), gmax + 1, gmax + 1, dtype=dtype)
        for i, h in enumerate(heads):
            check(h.dim == d, op, f"head {i} has d = {h.dim}, head 0 has d = {d}")
            check(h.eps == eps, op, f"head {i} has eps = {h.eps}, head 0 has {eps}; "
                  "one layer takes one eps")
            n = len(h.groups) + 1
            check(tuple(h.L.shape) == (n, n), op,
                  f"head {i}: L is {list(h.L.shape)}, {len(h.groups)} groups need [{n}, {n}]")
            for g, dims in enumerate(h.groups):
                for r in dims:
                    check(0 <= r < d, op, f"head {i} group {g}: dimension {r} not in 0..{d - 1}")
                    check(group_of[i, r] < 0, op, f"head {i}: dimension {r} is in two groups")
                    group_of[i, r] = g
            L[i, :n, :n] = h.L.to(dtype)
        check(bool((group_of >= 0).all()), op,
              "the groups of every head must cover all dimensions 0..d-1")
        return LayerKernels(group_of, L, float(eps))

    @staticmethod
    def taylor(groups, heads, eps=1e-6, dtype=torch.float64):
        """Every head with the same ``groups`` and the Taylor kernel (a starting point)."""
        L = taylor_lower(len(groups), eps)
        return LayerKernels.from_heads([HeadKernel(groups, L, eps)] * heads, dtype)

    def head(self, h):
        """Head h back as a HeadKernel (its leading (G+1) x (G+1) block of L)."""
        g = int(self.group_of[h].max()) + 1
        groups = [[r for r in range(self.dim) if int(self.group_of[h, r]) == i]
                  for i in range(g)]
        return HeadKernel(groups, self.L[h, :g + 1, :g + 1].detach().to(torch.float64),
                          self.eps)


@dataclass
class ModelKernels:
    """Kernels of (some) layers of a model: ``layers`` maps layer -> [HeadKernel]."""
    head_dim: int
    layers: dict
    meta: dict = field(default_factory=dict)

    def layer(self, index, dtype=torch.float64):
        """The LayerKernels of layer ``index``."""
        if index not in self.layers:
            fail("kernel_json", f"no kernels for layer {index}; the file has layers "
                 f"{sorted(self.layers)}")
        return LayerKernels.from_heads(self.layers[index], dtype)


@translated
def load_kernels(path):
    """Reads a kernel JSON file (our format or the official release layout)."""
    path = os.fspath(path)
    j = json.loads(torch.ops.oal.read_kernels(path))
    layers = {}
    for key, heads in j["layers"].items():
        layers[int(key)] = [
            HeadKernel([list(g) for g in h["groups"]],
                       _pack_to_dense(h["L"], len(h["groups"]) + 1), float(h["epsilon"]))
            for h in heads]
    return ModelKernels(int(j["head_dim"]), dict(sorted(layers.items())), j.get("meta", {}))
