#!/usr/bin/env python3
"""llama.cpp's outputs on a GGUF file that oal wrote (issue 26: "test that llama.cpp loads it").

`oal synth --gguf` writes a synthetic model as a llama.cpp GGUF file (names, metadata,
llama's Q/K row permutation, the tokenizer as tokenizer.ggml.* keys padded to the
embedding's rows). The synthetic generator is deterministic (same options, same bytes on
any machine), so CI can write the same file again and compare oal's logits with the ones
llama.cpp computed here. llama.cpp is too slow to build in CI; this script is how
tests/model/data/synthetic_llamacpp.json was produced. It:

  1. writes `oal synth --shape tiny --seed 3 --vocab 320 --gguf f32` (a vocabulary past
     the tokenizer's 289 tokens, so the padding is read too; F32 matrices: llama.cpp then
     multiplies in fp32 without quantizing activations, so the comparison tests the
     file's layout, not llama.cpp's arithmetic) and records its sha256;
  2. loads it with llama-cpp-python (llama_cpp.Llama, n_threads=2, logits_all) and
     records, for a few fixed id sequences, the argmax at every position and the full
     logits at the first, a middle and the last position; and the token ids of a few
     texts (llama.cpp's tokenizer reading oal's tokenizer.ggml.* keys).

Command (from the repository root, after `make build` and
`bash scripts/python-venv.sh --peer`):

  .cache/venv/bin/python scripts/llamacpp_synthetic_reference.py \\
      --out tests/model/data/synthetic_llamacpp.json

Options: --oal PATH (default build/release/oal), --out PATH.
"""
import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import llama_cpp
from llama_cpp import Llama

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SYNTH_ARGS = ["synth", "--shape", "tiny", "--seed", "3", "--vocab", "320", "--gguf", "f32"]
TEXTS = ["Once upon a time, there was a little girl.",
         "The quick brown fox, 12 jumps over 3.14 lazy dogs!",
         "  spaces   and\ttabs\nand lines\n"]


def sequences(vocab):
    """Fixed id sequences inside the tokenizer's real ids (the padding ids are unused)."""
    a = [(7 * i + 3) % vocab for i in range(24)]
    b = [(31 * i * i + 11) % vocab for i in range(40)]
    return [a, b]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--oal", default=os.path.join(ROOT, "build", "release", "oal"))
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "model", "data",
                                                 "synthetic_llamacpp.json"))
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny.gguf")
        subprocess.run([a.oal] + SYNTH_ARGS + ["--out", path], check=True,
                       stdout=subprocess.DEVNULL)
        with open(path, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        llm = Llama(model_path=path, n_ctx=128, n_threads=2, logits_all=True, verbose=False)
        # The tokenizer's own ids end where the <unused N> padding starts.
        real_vocab = next((i for i in range(llm.n_vocab())
                           if llm.detokenize([i]).startswith(b"<unused")), llm.n_vocab())
        runs = []
        for ids in sequences(real_vocab):
            llm.reset()
            llm.eval(ids)
            logits = np.array(llm.scores[: len(ids)], dtype=np.float64)
            picks = [0, len(ids) // 2, len(ids) - 1]
            runs.append({"ids": ids,
                         "argmax": [int(i) for i in logits.argmax(axis=1)],
                         "positions": picks,
                         "logits": [[round(float(v), 6) for v in logits[i]] for i in picks]})
        tokenize = [{"text": t, "ids": llm.tokenize(t.encode(), add_bos=False, special=False)}
                    for t in TEXTS]
    out = {
        "meta": {"llama_cpp_python": llama_cpp.__version__,
                 "date": datetime.date.today().isoformat(),
                 "oal_command": "oal " + " ".join(SYNTH_ARGS) + " --out FILE",
                 "gguf_sha256": sha, "n_vocab": llm.n_vocab(), "tokenizer_size": real_vocab,
                 "llama_params": {"n_ctx": 128, "n_threads": 2, "logits_all": True}},
        "runs": runs,
        "tokenize": tokenize,
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {a.out} (gguf sha256 {sha[:12]}..., {len(runs)} runs)", file=sys.stderr)


if __name__ == "__main__":
    main()
