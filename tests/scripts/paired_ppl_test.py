#!/usr/bin/env python3
"""scripts/paired_ppl.py against numbers worked here: the paired difference of per-block
mean NLL, its standard error, the PPL ratio and its interval, and clear refusals of runs
that do not pair (other blocks, other ctx, no block_nll)."""
import json
import math
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "paired_ppl.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True)


def main():
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="paired_ppl_"))
    base = {"ctx": 4096, "first_block": 7, "text": "t.raw"}
    a = dict(base, ppl=math.exp(3.0), block_nll=[3.0, 3.2, 2.8, 3.0])
    b = dict(base, ppl=math.exp(2.95), block_nll=[2.9, 3.2, 2.7, 3.0])
    files = {}
    for name, run_json in (("a", a), ("b", b)):
        files[name] = tmp / f"{name}.json"
        files[name].write_text(json.dumps(run_json))
    r = run(files["a"], files["b"], "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    # d = [-0.1, 0, -0.1, 0]: mean -0.05, sample sd sqrt(0.01/3), se = sd / 2.
    se = math.sqrt(0.01 / 3) / 2
    assert got["blocks"] == 4 and got["first_block"] == 7
    assert abs(got["mean_nll_diff"] + 0.05) < 1e-12, got
    assert abs(got["nll_diff_stderr"] - se) < 1e-12, got
    assert abs(got["ppl_ratio"] - math.exp(-0.05)) < 1e-12, got
    assert abs(got["ppl_ratio_95"][1] - math.exp(-0.05 + 1.96 * se)) < 1e-12, got
    assert got["blocks_b_lower"] == 2 and got["blocks_a_lower"] == 0, got
    assert "PPL ratio B/A 0.9512" in run(files["a"], files["b"]).stdout

    def refused(other, expect):
        path = tmp / "other.json"
        path.write_text(json.dumps(other) if isinstance(other, dict) else other)
        r = run(files["a"], path)
        assert r.returncode != 0 and expect in r.stderr, (expect, r.stderr)

    refused(dict(b, first_block=0), "differ in first_block")
    refused(dict(b, ctx=1024), "differ in ctx")
    refused(dict(b, block_nll=[3.0]), "1 blocks")
    refused({"ctx": 4096}, "no block_nll")
    refused("{not json", "cannot read")
    print("paired_ppl: ok")


if __name__ == "__main__":
    main()
