#!/usr/bin/env python3
"""`oal serve` and llama.cpp's llama-server side by side in one run (docs/serve.md).

Each server is started fresh for every repeat, one at a time, in turns (A B C A B C ...),
and measured by scripts/serve_load.py's throughput scenario; the table gives the median
over the repeats of each figure. Runs on loopback; turn autogroup off and keep other work
off the CPU.

  scripts/serve_compare.py --target native --repeats 3 --out runs/serve/short-native \\
      --oal softmax=build/release/oal:.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --llama-server .cache/peer/bin/llama-server

  --target native | avx2   avx2: oal's kernels forced to AVX2 (OAL_SIMD=avx2,
                           OPENBLAS_CORETYPE=Haswell) and the peer of
                           `PEER_SIMD=avx2 scripts/build-llama-cpp.sh` expected
  --oal NAME=BIN:MODEL[:ARGS]   an oal server (ARGS: extra `oal serve` flags, space separated)
  --llama-server BIN       the peer (checked against the committed reference when built),
                           configured by scripts/llama-server.sh (16 slots of 4096 tokens,
                           flash attention, f16 KV cache, the machine's threads)
  --llama-args "FLAGS"     more llama-server flags after the configuration's (a later flag
                           wins: long prompts need e.g. "-c 133120" for 16 slots of 8320)
  --concurrency, --rounds, --prompt-tokens, --max-tokens, --client-timeout: as serve_load.py
  --bench BIN              also time the model alone in every repeat (`BIN bench --model`:
                           median decode step at the context the one-client run sits at
                           halfway through its answer), so that one client's per-token
                           latency through the server compares with it in the same run

Writes OUT/runs.json (every run) and OUT/table.md (medians), and prints the table.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
FIELDS = ["tokens_per_s", "token_latency_ms_p50", "token_latency_ms_p99", "ttft_ms_p50", "rss_bytes_peak"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_args(a):
    return ["--scenario", "throughput", "--concurrency", a.concurrency, "--rounds", str(a.rounds),
            "--prompt-tokens", str(a.prompt_tokens), "--max-tokens", str(a.max_tokens),
            "--client-timeout", str(a.client_timeout)]


def run_oal(a, spec, env):
    name, rest = spec.split("=", 1)
    parts = rest.split(":", 2)
    binary, model = parts[0], parts[1]
    extra = parts[2].split() if len(parts) > 2 else []
    cmd = [sys.executable, str(ROOT / "scripts/serve_load.py"), "--oal", binary, "--model", model,
           *load_args(a), "--", "--max-sequences", "16", *extra]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return name, json.loads(out.stdout)["throughput"]


def run_llama(a, env):
    port = free_port()
    log = open(Path(a.out) / "llama-server.log", "a")
    proc = subprocess.Popen(["bash", str(ROOT / "scripts/llama-server.sh"), a.llama_server,
                             str(a.model), str(port), *a.llama_args.split()],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:  # serve_load.py --url waits for the server's /health
        cmd = [sys.executable, str(ROOT / "scripts/serve_load.py"), "--url",
               f"http://127.0.0.1:{port}", "--pid", str(proc.pid), *load_args(a)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        return "llama-server", json.loads(out.stdout)["throughput"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def run_bench(a, env):
    ctx = a.prompt_tokens + a.max_tokens // 2
    cmd = [a.bench, "bench", "--model", str(a.model), "--variants", "softmax", "--prefill-n", "",
           "--n", str(ctx), "--decode-steps", str(a.max_tokens), "--repeats", "1", "--json"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    row = next(r for r in json.loads(out.stdout)["rows"] if r["mode"] == "decode")
    return {"context": ctx, "decode_ms": row["ms_median"]}


def table(runs, concurrency):
    names = list(dict.fromkeys(r["server"] for r in runs if r["server"] != "bench"))
    lines = ["| server | clients | tokens/s | per-token p50 / p99 ms | time to first token p50 ms "
             "| peak RSS MB | state MB per sequence (max) | failed requests | runs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in concurrency:
        for n in names:
            rows = [row for r in runs if r["server"] == n for row in r["rows"] if row["concurrency"] == c]
            if not rows:
                continue
            med = {f: statistics.median(row.get(f) or 0 for row in rows) for f in FIELDS}
            state = max((row.get("state_bytes_per_sequence_max") or 0) for row in rows)
            lines.append(f"| {n} | {c} | {med['tokens_per_s']:.1f} | {med['token_latency_ms_p50']:.1f} / "
                         f"{med['token_latency_ms_p99']:.1f} | {med['ttft_ms_p50']:.0f} | "
                         f"{med['rss_bytes_peak'] / 1e6:.0f} | {f'{state / 1e6:.1f}' if state else '–'} | "
                         f"{sum(row['errors'] for row in rows)} of {sum(row['requests'] for row in rows)} | "
                         f"{len(rows)} |")
    bench = [r["bench"] for r in runs if r["server"] == "bench"]
    if bench:
        lines.append(f"\n`oal bench --model` decode step at context {bench[0]['context']} (the model alone, "
                     f"same runs): median {statistics.median(b['decode_ms'] for b in bench):.2f} ms "
                     f"over {len(bench)} runs")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", choices=["native", "avx2"], default="native")
    ap.add_argument("--oal", action="append", default=[], help="NAME=BIN:MODEL[:ARGS]")
    ap.add_argument("--llama-server", help="llama-server binary (omit: oal only)")
    ap.add_argument("--model", default=str(MODEL), help="llama-server's GGUF")
    ap.add_argument("--llama-args", default="", help="more llama-server flags (a later flag wins)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--client-timeout", type=float, default=600)
    ap.add_argument("--bench", help="an oal binary: time `bench --model` decode in every repeat")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.repeats < 1 or not (a.oal or a.llama_server):
        sys.exit("serve_compare: expected --repeats >= 1 and at least one server")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if a.target == "avx2":
        env.update(OAL_SIMD="avx2", OPENBLAS_CORETYPE="Haswell")
    runs = []
    for k in range(a.repeats):
        for spec in a.oal:
            name, rows = run_oal(a, spec, env)
            runs.append({"server": name, "repeat": k, "rows": rows})
            print(f"serve_compare: repeat {k} {name} done", file=sys.stderr)
        if a.bench:
            runs.append({"server": "bench", "repeat": k, "rows": [], "bench": run_bench(a, env)})
        if a.llama_server:
            name, rows = run_llama(a, env)
            runs.append({"server": name, "repeat": k, "rows": rows})
            print(f"serve_compare: repeat {k} llama-server done", file=sys.stderr)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    meta = {"cpu": cpu, "target": a.target, "threads": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
            "command": " ".join(sys.argv), "oal": a.oal, "llama_server": a.llama_server}
    json.dump({"meta": meta, "runs": runs}, open(Path(a.out) / "runs.json", "w"), indent=1)
    t = table(runs, [int(c) for c in a.concurrency.split(",")])
    (Path(a.out) / "table.md").write_text(t)
    print(f"{cpu}, target {a.target}, {os.cpu_count()} threads, medians of {a.repeats} runs\n\n{t}")


if __name__ == "__main__":
    main()
