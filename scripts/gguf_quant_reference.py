#!/usr/bin/env python3
"""Writes the gguf package's dequantization of ggml blocks, the reference that
tests/io/test_gguf_quants_reference.cpp compares oal::io::dequantize with.

Usage (with the project venv, scripts/python-venv.sh):
  .cache/venv/bin/python scripts/gguf_quant_reference.py --out DIR [--seed S]
      [--model FILE.gguf --tensors NAME1,NAME2,...]

For each type the gguf package dequantizes it writes DIR/<TYPE>.bin, random blocks,
and DIR/<TYPE>.f32, gguf.quants.dequantize() of them (little-endian float32):
  * block types: random bytes, with every fp16 scale field overwritten by a finite
    half: mostly of magnitude 1e-4..1 with either sign, some +-0, some subnormal;
  * F16 and BF16: every one of the 65536 bit patterns once (infinities and NaNs too:
    the conversion itself is under test);
  * F32: random finite floats.
With --model, for each named tensor of the file it writes DIR/model_<name>.f32, the
gguf dequantization of that tensor, and records its absolute byte offset in the file,
type, element count and byte count.

Quantization: DIR/quantize_Q8_0.f32, random floats (magnitudes 1e-6..1e3 per block,
an all-zero block, values that sit exactly between two quants), and
DIR/quantize_Q8_0.bin, gguf.quants.quantize() of them to Q8_0 (what `--weights q8_0`
must reproduce).

DIR/manifest.json: {"seed": S, "gguf_version": ..., "entries": [{"kind": "random" |
"model", "type": "Q4_1", "ggml_type_id": 3, "n_elements": N, "n_bytes": B, "files":
{"blocks": "Q4_1.bin", "reference": "Q4_1.f32"}}, ...]}; model entries have "name",
"offset" and "model" instead of a "blocks" file.
"""
import argparse
import json
import pathlib
import re
import sys
from importlib import metadata

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

# Byte offsets of the fp16 fields (scales, mins) inside one block of each type.
FP16_FIELDS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}
N_BLOCKS = 256


def random_halfs(rng, n):
    """n finite fp16 values: 80% +-10^U(-4,0), 10% +-0, 10% random subnormals."""
    mag = 10.0 ** rng.uniform(-4.0, 0.0, n)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    h = (sign * mag).astype(np.float16).view(np.uint16)
    kind = rng.random(n)
    zero = np.where(rng.random(n) < 0.5, 0x0000, 0x8000).astype(np.uint16)
    sub = (rng.integers(1, 0x400, n) | np.where(rng.random(n) < 0.5, 0, 0x8000)).astype(np.uint16)
    h = np.where(kind < 0.1, zero, np.where(kind < 0.2, sub, h)).astype(np.uint16)
    assert np.isfinite(h.view(np.float16)).all()
    return h


def random_blocks(rng, qtype):
    block_size, block_bytes = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (N_BLOCKS, block_bytes), dtype=np.uint8)
    for off in FP16_FIELDS[qtype]:
        raw[:, off:off + 2] = random_halfs(rng, N_BLOCKS).view(np.uint8).reshape(N_BLOCKS, 2)
    return raw.reshape(-1), N_BLOCKS * block_size


def plain_data(rng, qtype):
    if qtype in (T.F16, T.BF16):
        return np.arange(65536, dtype=np.uint16).view(np.uint8), 65536
    x = (rng.standard_normal(4096) * 10.0 ** rng.uniform(-40, 30, 4096)).astype(np.float32)
    x[:4] = [0.0, -0.0, 1e-45, -3.4e38]
    assert np.isfinite(x).all()
    return x.view(np.uint8), x.size


def reference(raw, qtype):
    out = np.asarray(gguf.quants.dequantize(raw, qtype), dtype=np.float32)
    return out.astype("<f4", copy=False).reshape(-1)


def write_random(out, rng):
    entries = []
    for qtype in [T.F32, T.F16, T.BF16, *FP16_FIELDS]:
        raw, n = plain_data(rng, qtype) if qtype in (T.F32, T.F16, T.BF16) else random_blocks(rng, qtype)
        ref = reference(raw, qtype)
        assert ref.size == n, (qtype.name, ref.size, n)
        raw.tofile(out / f"{qtype.name}.bin")
        ref.tofile(out / f"{qtype.name}.f32")
        entries.append({"kind": "random", "type": qtype.name, "ggml_type_id": int(qtype),
                        "n_elements": int(n), "n_bytes": int(raw.size),
                        "files": {"blocks": f"{qtype.name}.bin", "reference": f"{qtype.name}.f32"}})
    return entries


def write_quantize(out, rng):
    n_blocks = 512
    scale = 10.0 ** rng.uniform(-6, 3, (n_blocks, 1))
    x = (rng.standard_normal((n_blocks, 32)) * scale).astype(np.float32)
    x[0] = 0.0
    # Block 1: amax 127 (so d = 1 exactly) and halves: round-half-away-from-zero cases.
    x[1] = np.arange(32, dtype=np.float32) - 15.5
    x[1, 0] = 127.0
    x = x.reshape(-1)
    q = np.asarray(gguf.quants.quantize(x, T.Q8_0), dtype=np.uint8).reshape(-1)
    x.astype("<f4").tofile(out / "quantize_Q8_0.f32")
    q.tofile(out / "quantize_Q8_0.bin")
    return [{"kind": "quantize", "type": "Q8_0", "ggml_type_id": int(T.Q8_0),
             "n_elements": int(x.size), "n_bytes": int(q.size),
             "files": {"source": "quantize_Q8_0.f32", "reference": "quantize_Q8_0.bin"}}]


def write_model(out, model, names):
    reader = gguf.GGUFReader(model)
    by_name = {t.name: t for t in reader.tensors}
    file_bytes = np.memmap(model, dtype=np.uint8, mode="r")
    entries = []
    for name in names:
        if name not in by_name:
            sys.exit(f"gguf_quant_reference: {model} has no tensor {name!r}")
        t = by_name[name]
        qtype = T(int(t.tensor_type))
        stored = np.asarray(t.data).view(np.uint8).reshape(-1)
        offset = int(t.data_offset)
        # data_offset must be absolute (from the start of the file), not relative to
        # the data section: the bytes there must be the tensor's.
        if not np.array_equal(file_bytes[offset:offset + stored.size], stored):
            sys.exit(f"gguf_quant_reference: {name}: data_offset {offset} is not absolute")
        ref = reference(stored, qtype)
        assert ref.size == int(t.n_elements), (name, ref.size, t.n_elements)
        fname = "model_" + re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".f32"
        ref.tofile(out / fname)
        entries.append({"kind": "model", "name": name, "model": str(model), "type": qtype.name,
                        "ggml_type_id": int(qtype), "n_elements": int(t.n_elements),
                        "n_bytes": int(stored.size), "offset": offset,
                        "files": {"reference": fname}})
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", type=pathlib.Path)
    ap.add_argument("--tensors", default="")
    args = ap.parse_args()
    if bool(args.model) != bool(args.tensors):
        ap.error("--model and --tensors go together")
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    entries = write_random(args.out, rng)
    entries += write_quantize(args.out, rng)
    if args.model:
        entries += write_model(args.out, args.model, args.tensors.split(","))
    manifest = {"seed": args.seed, "gguf_version": metadata.version("gguf"),
                "numpy_version": np.__version__, "entries": entries}
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
