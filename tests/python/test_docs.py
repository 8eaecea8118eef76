"""docs/python.md's example runs as written, and the README points at it."""
import os
import re
import subprocess
import sys

from conftest import SOURCE_DIR, shared_file


def python_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def test_the_example_runs_as_written():
    shared_file("official-oal-qwen2.5-0.5b.json")
    example = python_blocks(SOURCE_DIR / "docs" / "python.md")[0]
    assert "load_kernels" in example and "state.step" in example
    assert len(example.strip().splitlines()) <= 25
    out = subprocess.run([sys.executable, "-c", example], cwd=SOURCE_DIR, env=os.environ,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "24 layers" in out.stdout
    assert "path: kernel (" in out.stdout
    assert "decode step == prefill: True" in out.stdout
    assert "state: [1, 2, 2145, 65] 1089 KiB" in out.stdout


def test_readme_has_the_python_line():
    readme = (SOURCE_DIR / "README.md").read_text()
    assert "docs/python.md" in readme and "import oal" in readme
