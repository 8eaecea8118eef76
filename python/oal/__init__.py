"""oal: Outlier-Aware Attention Linearization for PyTorch, over the project's C++ core.

Importing it loads the dispatcher ops (``torch.ops.oal.*``, built by the project's CMake
into ``<build>/python/oal/_oal_ops.so``). See docs/python.md.
"""
from . import _library
from .errors import Error, translated

# OAL_SIMD (a SIMD target, e.g. avx2) and OAL_GEMM (own, blas, auto), as for the CLI.
translated(__import__("torch").ops.oal.apply_env)()
from .ops import (attention, empty_state, feature_dim, kernel_path, reference, simd_path,
                  softmax_attention, step, windowed_attention)
from .kernels import HeadKernel, LayerKernels, ModelKernels, load_kernels, taylor_lower
from .modules import DecodeState, QuadraticAttention
from .converter import OalSelfAttention, apply_rotary, convert

__all__ = [
    "Error", "attention", "step", "softmax_attention", "windowed_attention", "simd_path", "kernel_path", "reference",
    "feature_dim", "empty_state", "HeadKernel", "LayerKernels", "ModelKernels",
    "load_kernels", "taylor_lower", "QuadraticAttention", "DecodeState",
    "OalSelfAttention", "apply_rotary", "convert",
]
