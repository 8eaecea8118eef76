#!/usr/bin/env python3
"""llama.cpp reference data for oal's GGUF support (SmolLM2-135M-Instruct, Q4_1).

llama.cpp is too slow to build in CI, so its outputs on the real model are committed as
tests/model/data/smollm2_llamacpp.json and this script is how they were produced. It runs
llama-cpp-python (llama_cpp.Llama, n_threads=2) on
.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-models.sh) and writes:

  meta       llama_cpp.__version__, llama.cpp system info, the GGUF file's sha256, the
             CPU model (lscpu), the date, the Llama() parameters of every run.
  protocol   in words, how every section below was tokenized and scored (mirrors
             `oal ppl`: tools/oal/cmd_ppl.cpp, src/oal/eval/perplexity.cpp,
             src/oal/text/corpus.cpp).
  tokenize   {texts: [{source, text, ids, ids_special?}], whole_file: {...}}: token ids
             of WikiText-2 lines, TinyStories paragraphs, the tokenizer-references.json
             texts and hand-written tricky strings; the whole WikiText-2 test file as one
             stream (count, sha256 of the int32 LE ids, first 2048 ids).
  logits     3 prompts: ids and per position argmax, top-10 (ids, logits), logsumexp,
             the logits at 4 fixed ids; the full last-position logits (4 decimals).
  generate   32 greedy (argmax) tokens after two prompts: ids and text.
  perplexity `oal ppl` protocol on WikiText-2 test for each --ctx N: mean NLL, PPL,
             blocks, targets, seconds, tokens/s, per-block NLL of the first 16 blocks.

Command (from the repository root, after `bash scripts/python-venv.sh --peer`):

  .cache/venv/bin/python scripts/llamacpp_reference.py \\
      --out tests/model/data/smollm2_llamacpp.json

Options: --ctx 512 1024 (the perplexity block lengths, default both); --ppl-seconds
960 300 (wall-time budget of each pass, 0 = none: on 2 shared cores llama.cpp scores only
~50-100 tokens/s with logits_all, so a whole pass over the 302K-token file takes about an
hour; a pass that runs out of time stops after a whole block and records the first K
blocks it scored, which `oal ppl --ctx N --max-blocks K` reproduces exactly; "complete"
says whether every block was scored); --max-blocks K (at most the first K blocks);
--model PATH; --data DIR (default ../shared/data); --out PATH. Progress goes to stderr.
About 25 minutes with the default budgets.
"""
import argparse
import base64
import datetime
import hashlib
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import llama_cpp
from llama_cpp import Llama

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
N_THREADS = 2
TOP_K = 10
FIRST_BLOCKS = 16
WHOLE_FILE_HEAD = 2048


def log(*args):
    print(f"[{time.strftime('%H:%M:%S')}]", *args, file=sys.stderr, flush=True)


# ---- oal's text splitting (src/oal/text/corpus.cpp), mirrored exactly ----
_TRIM = " \t\r\n\f\v"
_BLANK = " \t\r\f\v"


def _is_blank(line):
    return line.strip(_BLANK) == ""


def _lines_of(text):
    out = []
    for line in text.split("\n"):
        t = line.strip(_TRIM)
        if t:
            out.append(t)
    return out


def split_paragraphs(text):
    """oal::text::split_paragraphs: blank-line separated paragraphs, trimmed, inner line
    breaks kept ("\\r\\n" as "\\n"); a single multi-line paragraph (no blank lines at all)
    gives one paragraph per non-blank trimmed line."""
    out, cur = [], []

    def flush():
        t = "\n".join(cur).strip(_TRIM)
        if t:
            out.append(t)
        cur.clear()

    for line in text.split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        if _is_blank(line):
            flush()
        else:
            cur.append(line)
    flush()
    if len(out) == 1 and "\n" in out[0]:
        return _lines_of(out[0])
    return out


# ---- helpers ----
def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return None


def tok(llm, text, special=False):
    return list(llm.tokenize(text.encode("utf-8") if isinstance(text, str) else text,
                             add_bos=False, special=special))


def logsumexp64(x):
    """Row-wise log-sum-exp in float64 of a [T, V] float32 array."""
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return (m[..., 0] + np.log(np.exp(x - m).sum(axis=-1)))


def eval_logits(llm, ids):
    """Logits [len(ids), V] (float32 copy) of `ids` evaluated from an empty KV cache."""
    llm.reset()  # n_tokens = 0; eval() then removes every cached position >= 0
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float32, copy=True)


# ---- sections ----
TRICKY = [
    "2024 12 3.14",
    "1234567890 0.5 -42 1e10 3,000,000",
    "a  b   c    d",
    "  leading and trailing  ",
    " single leading space",
    "line\nnext\n\nafter blank\n\n\n",
    "\t\ttabs\tand\t \tmixed \t",
    "\r\nwindows\r\nlines\r\n",
    "I'm you'll THEY'RE we've she'd it's DON'T",
    "café naïve résumé Ünïcödé Ærøskøbing ß",
    "e\u0301 (decomposed e + combining acute) vs \u00e9",
    "中文字符和日本語のテキスト 한국어",
    "emoji 🤖🚀👍🏽 👨‍👩‍👧 flags 🇫🇷",
    "<|im_start|>user\nhi<|im_end|>",
    "<|endoftext|>",
    "",
    " ",
    "\n",
    "Hello world",
    "hello World HELLO wOrLd",
    "def f(x):\n    return x**2  # square\n",
    "https://example.com/a?b=c&d=e#frag",
    "$%^&*()_+=[]{}|\\;:'\",.<>/?`~",
]


def section_tokenize(llm, data_dir):
    wiki_path = os.path.join(data_dir, "wikitext2-test.raw")
    tiny_path = os.path.join(data_dir, "tinystories-dev.txt")
    refs_path = os.path.join(data_dir, "tokenizer-references.json")
    wiki_bytes = open(wiki_path, "rb").read()
    wiki = wiki_bytes.decode("utf-8")
    tiny = open(tiny_path, "rb").read().decode("utf-8")

    texts = []

    def add(source, text):
        ids = tok(llm, text, special=False)
        entry = {"source": source, "text": text, "ids": ids}
        ids_sp = tok(llm, text, special=True)
        if ids_sp != ids:
            entry["ids_special"] = ids_sp
        texts.append(entry)

    for t in split_paragraphs(wiki)[:40]:
        add("wikitext2-test.raw line (split_paragraphs, trimmed)", t)
    raw_lines = [l for l in wiki.split("\n") if l.strip(_TRIM)][:5]
    for t in raw_lines:
        add("wikitext2-test.raw line as is (untrimmed, no newline)", t)
    for t in split_paragraphs(tiny)[:20]:
        add("tinystories-dev.txt paragraph (split_paragraphs)", t)
    refs = json.load(open(refs_path, encoding="utf-8"))
    for family in sorted(refs):
        for e in refs[family]:
            add(f"tokenizer-references.json {family}", e["text"])
    for t in TRICKY:
        add("hand-written", t)
    log(f"tokenize: {len(texts)} texts")

    t0 = time.time()
    ids = tok(llm, wiki_bytes, special=False)
    secs = time.time() - t0
    ids_sp = tok(llm, wiki_bytes, special=True)
    arr = np.asarray(ids, dtype="<i4")
    whole = {
        "file": "wikitext2-test.raw",
        "file_bytes": len(wiki_bytes),
        "file_sha256": hashlib.sha256(wiki_bytes).hexdigest(),
        "tokens": len(ids),
        "ids_sha256_int32le": hashlib.sha256(arr.tobytes()).hexdigest(),
        "first_ids": ids[:WHOLE_FILE_HEAD],
        "last_ids": ids[-64:],
        "special_true_identical": ids_sp == ids,
        "tokenize_seconds": round(secs, 3),
    }
    log(f"tokenize: whole file {len(ids)} tokens in {secs:.1f} s")
    return {"texts": texts, "whole_file": whole}, ids


def section_logits(llm, prompts, fixed_ids):
    out = []
    for name, text, special in prompts:
        ids = tok(llm, text, special=special)
        lg = eval_logits(llm, ids)
        lse = logsumexp64(lg)
        positions = []
        for p in range(len(ids)):
            row = lg[p]
            top = np.argsort(-row, kind="stable")[:TOP_K]
            positions.append({
                "argmax": int(np.argmax(row)),
                "top_ids": [int(i) for i in top],
                "top_logits": [round(float(row[i]), 5) for i in top],
                "logsumexp": round(float(lse[p]), 6),
                "fixed_logits": [round(float(row[i]), 5) for i in fixed_ids],
            })
        out.append({
            "name": name,
            "text": text,
            "special": special,
            "ids": ids,
            "positions": positions,
            "last_logits_u8": quantized_u8(lg[-1]),
        })
        log(f"logits: {name}: {len(ids)} tokens")
    return out


def quantized_u8(values):
    """All logits of a position in 1 byte each (the file stays small): value = min +
    scale * code, rounding error at most scale / 2 (~0.07 for a logit range of ~35)."""
    v = np.asarray(values, dtype=np.float64)
    lo, hi = float(v.min()), float(v.max())
    scale = (hi - lo) / 255 or 1.0
    codes = np.clip(np.round((v - lo) / scale), 0, 255).astype(np.uint8)
    return {"min": lo, "scale": scale, "base64": base64.b64encode(codes.tobytes()).decode()}


def section_generate(llm, prompts, n_new, eos_id):
    out = []
    for name, text, special in prompts:
        ids = tok(llm, text, special=special)
        llm.reset()
        llm.eval(ids)
        new = []
        for _ in range(n_new):
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            new.append(nxt)
            llm.eval([nxt])
        first_eos = new.index(eos_id) if eos_id in new else None
        out.append({
            "name": name,
            "prompt_ids": ids,
            "new_ids": new,
            "text": llm.detokenize(new).decode("utf-8", errors="replace"),
            "first_eos_index": first_eos,
        })
        log(f"generate: {name}: {out[-1]['text']!r}")
    return out


def section_perplexity(model_path, stream, ctx, max_blocks, budget_s):
    llm = Llama(model_path=model_path, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                n_ctx=ctx, n_batch=ctx, n_ubatch=ctx, logits_all=True, verbose=False)
    available = len(stream) // ctx
    n_blocks = min(available, max_blocks) if max_blocks else available
    block_sums = []
    t_eval = t_nll = 0.0
    t_start = time.time()
    for b in range(n_blocks):
        if budget_s and b > 0 and time.time() - t_start > budget_s:
            log(f"ppl ctx {ctx}: time budget {budget_s} s spent, stopping after {b} blocks")
            n_blocks = b
            break
        block = stream[b * ctx:(b + 1) * ctx]
        t0 = time.time()
        lg = eval_logits(llm, block)
        t1 = time.time()
        x = lg[:-1].astype(np.float64)  # positions 0..ctx-2 predict tokens 1..ctx-1
        lse = logsumexp64(x)
        tgt = np.asarray(block[1:], dtype=np.int64)
        nll = lse - x[np.arange(ctx - 1), tgt]
        block_sums.append(float(nll.sum()))
        t_nll += time.time() - t1
        t_eval += t1 - t0
        if b % 8 == 0 or b == n_blocks - 1:
            ppl = math.exp(sum(block_sums) / (len(block_sums) * (ctx - 1)))
            rate = (b + 1) * ctx / t_eval
            log(f"ppl ctx {ctx}: block {b + 1}/{n_blocks}, ppl {ppl:.4f}, {rate:.0f} tok/s")
    # Re-evaluate block 0 after the others: equal NLL shows every block starts empty.
    lg0 = eval_logits(llm, stream[:ctx])
    x0 = lg0[:-1].astype(np.float64)
    nll0 = float((logsumexp64(x0) - x0[np.arange(ctx - 1), np.asarray(stream[1:ctx])]).sum())
    del llm
    targets = n_blocks * (ctx - 1)
    mean_nll = sum(block_sums) / targets
    block_means = [s / (ctx - 1) for s in block_sums]
    se = None
    if n_blocks >= 2:
        mu = sum(block_means) / n_blocks
        se = math.sqrt(sum((m - mu) ** 2 for m in block_means) / (n_blocks - 1) / n_blocks)
    return {
        "ctx": ctx,
        "stream_tokens": len(stream),
        "blocks_available": available,
        "blocks": n_blocks,
        "complete": n_blocks == available,
        "targets": targets,
        "nll": mean_nll,
        "ppl": math.exp(mean_nll),
        "nll_stderr": se,
        "ppl_stderr": math.exp(mean_nll) * se if se is not None else None,
        "first_block_nll": block_means[:FIRST_BLOCKS],
        "block0_reeval_nll": nll0 / (ctx - 1),
        "eval_seconds": round(t_eval, 2),
        "nll_seconds": round(t_nll, 2),
        "tokens_per_second": round(n_blocks * ctx / t_eval, 1),
        "llama_params": {"n_ctx": ctx, "n_batch": ctx, "n_ubatch": ctx, "logits_all": True,
                          "n_threads": N_THREADS},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--data", default=os.path.normpath(os.path.join(ROOT, "../shared/data")))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/model/data/smollm2_llamacpp.json"))
    ap.add_argument("--ctx", type=int, nargs="*", default=[512, 1024])
    ap.add_argument("--max-blocks", type=int, default=0)
    ap.add_argument("--ppl-seconds", type=float, nargs="*", default=[960, 300],
                    help="wall-time budget of each --ctx pass (0 = none); a pass that runs "
                         "out scores the first K blocks only (`oal ppl --max-blocks K`)")
    args = ap.parse_args()
    t_start = time.time()

    log(f"llama_cpp {llama_cpp.__version__}, model {args.model}")
    meta = {
        "llama_cpp_python_version": llama_cpp.__version__,
        "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "model_file": os.path.basename(args.model),
        "model_sha256": sha256_file(args.model),
        "cpu": cpu_model(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "n_threads": N_THREADS,
        "command": "scripts/llamacpp_reference.py " + " ".join(sys.argv[1:]),
    }

    llm = Llama(model_path=args.model, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                n_ctx=512, logits_all=True, verbose=False)
    meta["gguf_metadata"] = {k: v for k, v in llm.metadata.items() if k != "tokenizer.chat_template"}
    meta["chat_template"] = llm.metadata.get("tokenizer.chat_template")
    meta["n_vocab"] = llm.n_vocab()
    meta["bos_id"] = llm.token_bos()
    meta["eos_id"] = llm.token_eos()
    meta["llama_params_prompts"] = {"n_ctx": 512, "logits_all": True, "n_threads": N_THREADS}

    tokenize, stream = section_tokenize(llm, args.data)

    wiki_sentence = ("Robert Boulter is an English film , television and theatre actor . He had a "
                     "guest @-@ starring role on the television series The Bill in 2000 .")
    story = "Once upon a time, there was a little girl named Lily. She loved to"
    chat = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\n")
    prompts = [("wikitext2_sentence", wiki_sentence, False),
               ("tinystories_opening", story, False),
               ("chat", chat, True)]
    the_id = tok(llm, " the")[0]
    fixed_ids = [0, 2, the_id, llm.n_vocab() - 1]
    logits = section_logits(llm, prompts, fixed_ids)
    generate = section_generate(llm, prompts[1:], 32, llm.token_eos())
    del llm

    ppl = []
    for i, ctx in enumerate(args.ctx):
        budget = args.ppl_seconds[i] if i < len(args.ppl_seconds) else 0
        log(f"perplexity: ctx {ctx}, budget {budget} s")
        ppl.append(section_perplexity(args.model, stream, ctx, args.max_blocks, budget))
        log(f"perplexity ctx {ctx}: ppl {ppl[-1]['ppl']:.4f} in {ppl[-1]['eval_seconds']} s")

    protocol = {
        "tokenize": (
            "llm.tokenize(text.encode('utf-8'), add_bos=False, special=False) -> 'ids'; "
            "'ids_special' (present only when different) is special=True, i.e. added tokens "
            "such as <|im_start|> matched in the text, which is what oal's HF tokenizer does "
            "(hf_bpe_tokenizer.h step 1). Texts: the first 40 paragraphs of "
            "wikitext2-test.raw by oal::text::split_paragraphs (the file has no blank lines, "
            "so one per non-blank line, trimmed of ' \\t\\r\\n\\f\\v'); its first 5 "
            "non-blank lines as is (leading space kept, no newline); the first 20 "
            "split_paragraphs of tinystories-dev.txt (blank-line separated, trimmed); every "
            "text of tokenizer-references.json (qwen, then llama3); hand-written strings."),
        "whole_file": (
            "the bytes of wikitext2-test.raw exactly as oal::text::read_text_file returns "
            "them (no decoding, stripping or splitting) tokenized as ONE text, add_bos=False, "
            "special=False, as `oal ppl` does: tok->encode(read_text_file(path), false). "
            "ids_sha256_int32le = sha256 of the ids as little-endian int32."),
        "logits": (
            "each prompt tokenized with add_bos=False (special=True for the chat prompt) and "
            "evaluated from an empty KV cache with Llama(n_ctx=512, logits_all=True); per "
            "position p the logits predict token p+1: argmax, top-10 ids/logits (descending), "
            "logsumexp (float64), fixed_logits at fixed_ids; last_logits_u8 = every logit of the "
            "last position as uint8 codes (min + scale * code, error at most scale / 2), base64."),
        "fixed_ids": fixed_ids,
        "generate": (
            "greedy: argmax of the last position's logits, appended and evaluated, 32 times; "
            "no sampling, no repetition penalty, no stop at EOS (first_eos_index says where "
            "the first EOS id is, null if none); text = detokenize(new_ids)."),
        "perplexity": (
            "`oal ppl` protocol (src/oal/eval/perplexity.cpp): the whole-file stream above "
            "(no BOS) cut into floor(tokens / ctx) non-overlapping blocks of ctx tokens, the "
            "incomplete tail dropped; each block evaluated from an empty KV cache "
            "(llm.reset(); llm.eval(block)); the ctx-1 targets of a block are its tokens 1.."
            "ctx-1 predicted by positions 0..ctx-2 (the first token of a block is never a "
            "target); blocks = the first K blocks (K = all floor(tokens/ctx) when complete, "
            "else as many as the time budget allowed: `oal ppl --ctx N --max-blocks K`); "
            "NLL = logsumexp - logit[target] in float64 from llm.scores; nll = "
            "mean over all blocks*(ctx-1) targets, ppl = exp(nll); nll_stderr as oal: "
            "sample std of the per-block means / sqrt(blocks). first_block_nll = per-block "
            "mean NLL of the first 16 blocks; block0_reeval_nll = block 0 scored again after "
            "all others (equal to first_block_nll[0] iff the cache is really cleared)."),
    }
    result = {
        "meta": meta,
        "protocol": protocol,
        "tokenize": tokenize,
        "logits": logits,
        "generate": generate,
        "perplexity": ppl,
    }
    meta["total_seconds"] = round(time.time() - t_start, 1)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    log(f"wrote {args.out} ({os.path.getsize(args.out) / 1e6:.2f} MB) in {meta['total_seconds']} s")


if __name__ == "__main__":
    main()
