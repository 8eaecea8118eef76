#!/usr/bin/env python3
"""Coefficients of the flash softmax's exp (src/oal/simd/simd_tiles-inl.h, exp_nonpositive).

exp(x) = 2^n · e^r with n = round(x / ln 2) and r = x − n·ln 2 in [−ln2/2, ln2/2]; e^r is a
degree-6 polynomial fitted at Chebyshev nodes of that interval (interpolation error ~2e-9,
far below float's 6e-8, so the float evaluation's rounding sets the error). ln 2 is split
into a 16-bit head and the rest: n·ln2_hi is exact for |n| < 256 and x − n·ln2_hi is
exact too, so the reduction loses no bits even on targets without FMA (SSE4, scalar).

    .cache/venv/bin/python scripts/fit_exp_poly.py
"""
import numpy as np

half = np.log(2.0) / 2
nodes = half * np.cos((2 * np.arange(64) + 1) * np.pi / 128)
coef = np.polynomial.polynomial.polyfit(nodes, np.exp(nodes), 6)
grid = np.linspace(-half, half, 100001)
err = np.max(np.abs(np.polynomial.polynomial.polyval(grid, coef) / np.exp(grid) - 1))
ln2_hi = np.float32(np.round(np.log(2.0) * 2**16) / 2**16)
ln2_lo = np.float32(np.log(2.0) - np.float64(ln2_hi))
print(f"max relative interpolation error {err:.2e}")
print(f"ln2_hi {float(ln2_hi)!r}f  ln2_lo {float(ln2_lo)!r}f")
for i, c in enumerate(coef):
    print(f"c{i} {float(np.float32(c))!r}f")
