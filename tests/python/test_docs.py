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
    assert "path: simd (" in out.stdout
    assert "decode step == prefill: True" in out.stdout
    assert "state: [1, 2, 2145, 65] 1089 KiB" in out.stdout


def test_readme_has_the_python_line():
    readme = (SOURCE_DIR / "README.md").read_text()
    assert "docs/python.md" in readme and "import oal" in readme


# A path the docs name: src/, tools/, scripts/, tests/, fuzz/ or python/, optionally with
# one {a,b} alternation and a trailing .* or glob (as "src/oal/adapt/{hybrid,lora}.*").
DOC_PATH = re.compile(r"`((?:src|tools|scripts|tests|fuzz|python)/[A-Za-z0-9_./{},*<>-]+)`")


def expand_braces(pattern):
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [p for alt in m.group(1).split(",")
            for p in expand_braces(pattern[:m.start()] + alt + pattern[m.end():])]


def test_paths_named_in_the_docs_exist():
    # Files move (eval/demo_* went to demo/, train/convert to convert/), and a doc that
    # names a file's old place points the reader at nothing. Names with angle brackets
    # (<module>) stand for any module, not a file, and are skipped.
    docs = sorted((SOURCE_DIR / "docs").glob("*.md")) + [SOURCE_DIR / "README.md"]
    missing = []
    for doc in docs:
        for path in DOC_PATH.findall(doc.read_text()):
            if "<" in path:
                continue
            for p in expand_braces(path.rstrip(".,")):
                if not list(SOURCE_DIR.glob(p)):
                    missing.append(f"{doc.name}: {p}")
    assert not missing, "docs name paths that do not exist:\n" + "\n".join(missing)
