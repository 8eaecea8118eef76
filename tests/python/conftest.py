"""pytest set-up for the Python package tests (run by ctest with PYTHONPATH pointing at
<build>/python; run by hand as
  PYTHONPATH=build/release/python /usr/bin/python3 -m pytest tests/python
from the project root)."""
import os
import pathlib

import pytest
import torch

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]


def shared_file(name):
    """../shared/data/<name>: skipped when absent, a failure when OAL_REQUIRE_SHARED=1
    (as .ci/run sets), like the C++ tests' OAL_REQUIRE_SHARED_FILE."""
    base = pathlib.Path(os.environ.get("OAL_SHARED_DATA", SOURCE_DIR / ".." / "shared" / "data"))
    path = base / name
    if not path.exists():
        if os.environ.get("OAL_REQUIRE_SHARED") == "1":
            pytest.fail(f"shared data file missing (OAL_REQUIRE_SHARED=1): {path}")
        pytest.skip(f"shared data file missing: {path}")
    return path


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
