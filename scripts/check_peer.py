#!/usr/bin/env python3
"""Checks a llama.cpp build against the committed llama.cpp reference before a table uses it.

On CPUs with AMX, llama.cpp built with -march=native computes wrong logits (PPL 378 where
the reference says 27.1), and a wrong peer makes every side-by-side number meaningless.
This starts the build's llama-server on SmolLM2-135M-Instruct (Q4_1) and compares it
with tests/model/data/smollm2_llamacpp.json (llama-cpp-python 0.3.16, the same vendored
llama.cpp, made by scripts/llamacpp_reference.py):

  next token   for the reference's three logits prompts, the server's next-token
               log-probabilities (n_probs 20, from the full softmax) of the reference's
               top-10 ids against log_softmax of the reference's logits: all ten present,
               mean |difference| <= 0.3, max <= 1.5, and the same argmax unless the
               reference's top-2 margin is <= 0.5.
  greedy       the reference's two 32-token greedy continuations fed one token at a time:
               at every step the server's top token is the reference's, or the
               reference's is within 0.5 of it.

  The bounds are those tests/eval/test_smollm2_llamacpp.cpp holds oal's exact fp32 model
  to against the same reference. Builds with other SIMD flags differ by rounding only
  (measured on an Emerald Rapids Xeon: AVX-512 mean 0.0002, AVX2 0.08-0.12); the native
  AMX build fails (mean 0.70 and 0.44, argmax and greedy wrong).

  scripts/check_peer.py --server .cache/peer/bin/llama-server [--model M] [--json]

Exit status 0 when both checks pass, 1 when one fails (what differs is printed), 2 when
the server cannot be started. Standard library only.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
REFERENCE = os.path.join(ROOT, "tests/model/data/smollm2_llamacpp.json")
MODEL = os.path.join(ROOT, ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf")
# The bounds tests/eval/test_smollm2_llamacpp.cpp holds oal's exact fp32 model to against
# the same reference (its comment says why): a right llama.cpp build, which only sums
# and rounds its Q8 activations in another order, stays far inside them.
MEAN_TOLERANCE = 0.3  # mean |Δ log p| over the reference's top 10
MAX_TOLERANCE = 1.5   # the largest of those ten
K_TIE = 0.5           # a top-2 margin below which either token may win


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


def wait_healthy(url, proc, seconds=300):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(0.5)
    return False


def top_logprobs(url, ids, n=10):
    """The server's n most likely next tokens after `ids`: {id: log p} (full softmax)."""
    r = post(url + "/completion", {"prompt": ids, "n_predict": 1, "n_probs": n,
                                   "temperature": 0, "cache_prompt": False})
    return {t["id"]: t["logprob"] for t in r["completion_probabilities"][0]["top_logprobs"]}


def check_next_token(url, prompt):
    """The reference's top-10 at the prompt's last position against the server's."""
    last = prompt["positions"][-1]
    want = {i: l - last["logsumexp"] for i, l in zip(last["top_ids"], last["top_logits"])}
    got = top_logprobs(url, prompt["ids"], 20)
    missing = [i for i in want if i not in got]
    diffs = [abs(got[i] - lp) for i, lp in want.items() if i in got]
    margin = last["top_logits"][0] - last["top_logits"][1]
    top = max(got, key=got.get)
    ok = (not missing and sum(diffs) / len(diffs) <= MEAN_TOLERANCE and max(diffs) <= MAX_TOLERANCE
          and (top == last["argmax"] or margin <= K_TIE))
    return {"prompt": prompt["name"], "mean_abs_logprob_diff": sum(diffs) / max(1, len(diffs)),
            "max_abs_logprob_diff": max(diffs, default=float("inf")), "missing_ids": missing,
            "argmax": top, "reference_argmax": last["argmax"], "ok": ok}


def check_greedy(url, gen):
    """The reference's greedy tokens fed one by one: at each step the server's top token is
    the reference's, or the reference's is within K_TIE of it."""
    ids = list(gen["prompt_ids"])
    worst = None
    for k, want in enumerate(gen["new_ids"]):
        got = top_logprobs(url, ids)
        top = max(got, key=got.get)
        gap = got[top] - got.get(want, -float("inf"))
        if top != want and gap > K_TIE:
            worst = {"index": k, "got": top, "want": want, "gap": gap}
            break
        ids.append(want)
    return {"prompt": gen["name"], "steps": len(gen["new_ids"]), "ok": worst is None,
            "first_failure": worst}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", required=True, help="the llama-server binary of the build to check")
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--reference", default=REFERENCE)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    a = ap.parse_args()
    ref = json.load(open(a.reference))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile(prefix="check-peer-", suffix=".log", delete=False)
    proc = subprocess.Popen([a.server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port),
                             "-c", "2048", "-np", "1", "-t", "2", "--no-webui"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        if not wait_healthy(url, proc):
            print(f"check_peer: {a.server} did not start (log: {log.name})", file=sys.stderr)
            return 2
        result = {"server": a.server, "next_token": [check_next_token(url, p) for p in ref["logits"]],
                  "greedy": [check_greedy(url, g) for g in ref["generate"]]}
        result["ok"] = all(x["ok"] for x in result["next_token"] + result["greedy"])
        ok = result["ok"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if a.json:
        print(json.dumps(result, indent=1))
    else:
        for n in result["next_token"]:
            print(f"next token  {n['prompt']:22s} top-10 |dlogp| mean {n['mean_abs_logprob_diff']:.4f} "
                  f"max {n['max_abs_logprob_diff']:.4f}, argmax {n['argmax']} (reference "
                  f"{n['reference_argmax']}), missing {n['missing_ids']}  {'ok' if n['ok'] else 'WRONG'}")
        for g in result["greedy"]:
            print(f"greedy      {g['prompt']:22s} {g['steps']} steps teacher-forced  "
                  f"{'ok' if g['ok'] else 'WRONG: ' + str(g['first_failure'])}")
        print("check_peer: " + ("the peer agrees with the committed reference" if ok else
              "the peer DISAGREES with the committed reference: do not use it (an AMX build?)"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
