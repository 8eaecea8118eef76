"""Loads the C++ ops library that sits beside this file (built by CMake)."""
import os

import torch

_NAME = "_oal_ops.so"
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), _NAME)
if not os.path.isfile(path):
    raise ImportError(
        f"[oal] {path} is missing: import the package from the build tree "
        "(PYTHONPATH=build/release/python after `make build`), not from python/")
torch.ops.load_library(path)
