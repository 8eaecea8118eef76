#!/usr/bin/env python3
"""SentencePiece reference data for oal's GGUF "llama" (SentencePiece) tokenizer.

No real SentencePiece GGUF model is on this machine, so this script makes the vocabulary:
it trains a 512-piece BPE SentencePiece model with Google's own `sentencepiece` package
(PyPI, pinned in scripts/python-venv.sh) on the first 4,000 lines of TinyStories
(../shared/data/tinystories-dev.txt), with the settings of Llama-1/2's tokenizer.model
(BPE, byte fallback, identity normalisation, a dummy prefix, extra whitespace kept,
whitespace-only pieces allowed, digits split), and writes what llama.cpp's converter
would put in a GGUF file plus `sentencepiece`'s own encodings of held-out text:

  meta    sentencepiece version, trainer settings, date
  vocab   tokens (pieces), scores, types (llama.cpp token types: 1 normal, 2 unknown,
          3 control, 6 byte), unk/bos/eos ids
  cases   [{source, text, ids, decoded}]: TinyStories lines after the training lines,
          WikiText-2 test lines (another domain: rarer characters, byte fallback) and
          hand-written edge cases (spaces, tabs, newlines, accents, CJK, emoji, digits;
          no control-token text such as "<s>": oal cuts those out as special tokens, as
          its other tokenizers do, where sentencepiece reads them as characters);
          ids = encode(text) without BOS, decoded = decode(ids)

Output: tests/text/data/spm_reference.json (committed; tests/text/test_spm_tokenizer.cpp
reads it). Usage: .cache/venv/bin/python scripts/spm_reference.py
"""
import datetime
import io
import json
import os
import sys

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "..", "shared", "data")
OUT = os.path.join(ROOT, "tests", "text", "data", "spm_reference.json")
TRAIN_LINES = 4000
SETTINGS = dict(vocab_size=512, model_type="bpe", byte_fallback=True,
                normalization_rule_name="identity", add_dummy_prefix=True,
                remove_extra_whitespaces=False, allow_whitespace_only_pieces=True,
                split_digits=True, character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2,
                pad_id=-1, num_threads=1, seed_sentencepiece_size=100000)

EDGE = ["", " ", "  ", "a", " a", "a ", "  leading", "trailing  ", "two  spaces", "x   y    z",
        "tab\there", "new\nline", "\n", "end.\n\n", "Once upon a time", "ONCE UPON A TIME",
        "café naïve résumé", "Ünïcödé", "日本語のテキスト", "emoji 😀 and 🎉!", "2026-12-04 at 12:30",
        "3.14159", "don't won't can't", "a,b;c:d!e?f", "(parens) [brackets] {braces}",
        "<0x41> literal byte text", "\u2581 literal U+2581", "Ωμέγα", "ñ"]


def types_of(sp):
    out = []
    for i in range(sp.get_piece_size()):
        if sp.is_unknown(i):
            out.append(2)
        elif sp.is_control(i):
            out.append(3)
        elif sp.is_byte(i):
            out.append(6)
        elif sp.is_unused(i):
            out.append(5)
        else:
            out.append(1)
    return out


def main():
    lines = open(os.path.join(DATA, "tinystories-dev.txt"), encoding="utf-8").read().splitlines()
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines[:TRAIN_LINES]), model_writer=model,
                                   minloglevel=2, **SETTINGS)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    wiki = open(os.path.join(DATA, "wikitext2-test.raw"), encoding="utf-8").read().splitlines()
    held = [l for l in lines[TRAIN_LINES:] if l.strip()][:100]
    wiki = [l for l in wiki if l.strip() and len(l) <= 300][:100]  # short lines: a small file
    cases = []
    for source, texts in (("tinystories", held), ("wikitext2", wiki), ("edge", EDGE)):
        for t in texts:
            ids = sp.encode(t)
            cases.append({"source": source, "text": t, "ids": ids, "decoded": sp.decode(ids)})
    n = sp.get_piece_size()
    out = {
        "meta": {"sentencepiece": spm.__version__, "settings": SETTINGS, "train_lines": TRAIN_LINES,
                 "train_text": "tinystories-dev.txt", "date": datetime.date.today().isoformat()},
        "vocab": {"tokens": [sp.id_to_piece(i) for i in range(n)],
                  "scores": [sp.get_score(i) for i in range(n)], "types": types_of(sp),
                  "unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id()},
        "cases": cases,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    # One line per section entry (a case, the vocabulary lists): small and diffable.
    dump = lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    with open(OUT + ".part", "w", encoding="utf-8") as f:
        f.write('{"meta":' + dump(out["meta"]) + ',\n"vocab":{\n')
        f.write(",\n".join(f'"{k}":{dump(v)}' for k, v in out["vocab"].items()))
        f.write('},\n"cases":[\n' + ",\n".join(dump(c) for c in cases) + "\n]}\n")
    os.replace(OUT + ".part", OUT)
    print(f"spm_reference: {len(cases)} cases, {n} pieces -> {os.path.relpath(OUT, ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
