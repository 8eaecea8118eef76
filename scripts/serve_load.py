#!/usr/bin/env python3
"""A bounded load generator for OpenAI-compatible servers on loopback (`oal serve`, and
llama.cpp's server for comparison). Standard library only; every run is bounded in
request count and in time.

Scenarios (--scenario, several may be given; results as one JSON object on stdout):
  throughput  for each concurrency C in --concurrency: C clients at once, each streaming
              --rounds completions of --max-tokens tokens, each after a prompt of its own
              of --prompt-tokens token ids (so no server answers one from a prompt cache;
              --repeat-prompts sends each client's first prompt again in every round, the
              protocol of the measurements before 2026-12-06, which llama-server's prompt
              cache reads almost for free); total generated tokens/s over the wall time,
              per-token latency (gaps between streamed chunks) p50/p99, time to first
              token p50, and (oal) the least and most state bytes per active sequence
              sampled from /metrics while the clients run.
  mixed       --requests requests from --workers clients, about --invalid-fraction of them
              invalid (malformed JSON, wrong types, unknown model, empty prompt, absurd
              max_tokens, bad conversation id, wrong key, oversized body, unknown route,
              a client disconnecting mid-stream); every answer is checked (valid: 200 and
              a finish_reason; invalid: its 4xx status and an OpenAI-shaped error), the
              server must stay up, and its RSS is read cold, after a warm-up of one
              request per client (the start), at the peak and after.
  shared-prefix  one system prompt of --prefix-tokens token ids, then --conversations
              conversations that start with it (each followed by --prompt-tokens ids of its
              own, then --max-tokens generated), from --workers clients at once: the
              system prompt is first sent alone (max_tokens 1) so that a server can keep
              it; wall time, request latency p50/p99, the prompt tokens the server
              read (its /metrics: oal_step_prompt_tokens_total, or llama-server's
              llamacpp:prompt_tokens_total with --metrics) and peak RSS. Every answer is
              greedy; their texts are returned (sha256 of the joined texts) so that a run
              with sharing can be checked against one without.
  faults      what a hostile or broken client does, one after the other, the server's RSS
              read warmed (after one request), at the peak and after: --idle-connections
              TCP connections opened and left idle (this process raises its open-file
              limit to the hard one), with /health asked five times while they are open
              (status and latency: a bounded server answers 200, or 503 at once, never
              hangs) and the seconds until it answers 200 after they close; a client
              sending its request one byte a second (how long the server holds it, and
              its answer: 408 after --request-timeout); a 100 MB body (the status, and
              how much the server read before answering). /metrics' refused connections.
  kill9       --kills rounds over one state directory, each with its own `oal serve
              --state-dir D --max-state-memory 0` (every conversation is written to D when
              its request ends; needs --oal and --model, not --url): a conversation of
              --prompt-tokens token ids, and kill -9: in even rounds at a random moment
              of --kill-window LO,HI times one such request's time (measured first) from
              its start (before, while or after its state file is written), in odd rounds
              0-20 ms after the state's temporary file appears (mid-write);
              then one more server on D continues every conversation: each must either
              continue from its file (cached tokens > 0) or start afresh as if it had no
              file, never fail, and no temporary file may be left. Counts each outcome.
  memory      for each N in --contexts: one conversation of N - 1 prompt tokens and one
              generated token (N positions), then the saved conversation's state bytes
              from /metrics (oal serve only).

The server is started here (--oal BIN --model PATH, extra `oal serve` flags after --) or
given (--url, with --pid for its RSS; its /health is awaited first, up to 300 s). Token-id prompts are drawn from --token-range with
a fixed seed, so every server reads the same tokens.

  scripts/serve_load.py --oal build/release/oal --model M.gguf --scenario throughput \\
      --concurrency 1,4,16 --json -- --max-sequences 16
"""
import argparse
import hashlib
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path


def percentile(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def rss_bytes(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class Server:
    def __init__(self, a, extra_args=()):
        self.proc, self.key, self.pid = None, a.api_key, a.pid
        if a.url:
            host, _, port = a.url.replace("http://", "").rstrip("/").partition(":")
            self.host, self.port = host, int(port or 80)
            self.wait_healthy(a.url.rstrip("/"))
            return
        self.tmp = tempfile.mkdtemp(prefix="serve_load_")
        port_file = Path(self.tmp) / "port"
        cmd = [a.oal, "serve", "--model", a.model, "--port", "0", "--port-file", str(port_file),
               "--api-key", self.key, "--name", "m"] + a.serve_args + list(extra_args)
        self.log = open(Path(self.tmp) / "serve.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.pid, self.host = self.proc.pid, "127.0.0.1"
        deadline = time.time() + 600
        while not port_file.exists():
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit("serve_load: the server did not start:\n" + (Path(self.tmp) / "serve.log").read_text())
            time.sleep(0.2)
        time.sleep(0.1)
        self.port = int(port_file.read_text())

    def wait_healthy(self, url, seconds=300):
        """A server just started (llama-server loads its model first): wait for /health."""
        end = time.time() + seconds
        while time.time() < end:
            try:
                with urllib.request.urlopen(url + "/health", timeout=5):
                    return
            except OSError:
                time.sleep(0.5)
        sys.exit(f"serve_load: {url}/health did not answer within {seconds} s")

    def alive(self):
        return self.proc is None or self.proc.poll() is None

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=60)

    def request(self, method, path, body=None, key="default", timeout=600, headers=None):
        """(status, text) of one plain request."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        k = self.key if key == "default" else key
        if k:
            h["Authorization"] = f"Bearer {k}"
        h.update(headers or {})
        data = body if isinstance(body, (bytes, type(None))) else body.encode()
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        text = r.read().decode(errors="replace")
        c.close()
        return r.status, text

    def stream(self, body, timeout=600):
        """Streams one completion: (status, [chunk arrival times], finish_reason, t_start)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        t0 = time.perf_counter()
        c.request("POST", "/v1/completions", body=json.dumps({**body, "stream": True}),
                  headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"})
        r = c.getresponse()
        if r.status != 200:
            r.read()
            return r.status, [], None, t0
        times, finish = [], None
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            j = json.loads(payload)
            ch = j.get("choices") or [{}]
            if ch[0].get("text"):
                times.append(time.perf_counter())
            finish = ch[0].get("finish_reason") or finish
        c.close()
        return 200, times, finish, t0

    def metrics(self):
        try:
            status, text = self.request("GET", "/metrics", timeout=30)
        except OSError:
            return {}
        if status != 200:
            return {}
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#") and "{" not in line:
                name, _, value = line.partition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    pass
        return out


def run_clients(client, n):
    """Runs client(i) for i in 0..n-1 on n threads at once; returns the wall time."""
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def token_prompt(rng, n, lo, hi):
    return [rng.randrange(lo, hi) for _ in range(n)]


def throughput(srv, a):
    rows = []
    for conc in a.concurrency:
        rng = random.Random(conc)
        prompts = [[token_prompt(rng, a.prompt_tokens, *a.token_range) for _ in range(a.rounds)]
                   for _ in range(conc)]
        if a.repeat_prompts:
            prompts = [[p[0]] * a.rounds for p in prompts]
        gaps, ttft, tokens, errors = [], [], [0], []
        per_seq = []  # state bytes per active sequence, sampled
        peak_rss = [rss_bytes(srv.pid) or 0]
        lock = threading.Lock()
        stop_sampling = threading.Event()

        def sample():  # state bytes per active sequence and the server's RSS, while the clients run
            while not stop_sampling.is_set():
                peak_rss[0] = max(peak_rss[0], rss_bytes(srv.pid) or 0)
                m = srv.metrics()
                if m.get("oal_sequences_active", 0) > 0:
                    per = m.get("oal_state_bytes", 0) / m["oal_sequences_active"]
                    with lock:
                        per_seq.append(per)
                stop_sampling.wait(0.5)

        def client(i):
            for k in range(a.rounds):
                body = {"model": "m", "prompt": prompts[i][k], "max_tokens": a.max_tokens, "temperature": 0,
                        "ignore_eos": True}
                try:
                    status, times, finish, t0 = srv.stream(body, timeout=a.client_timeout)
                except OSError:  # no byte for --client-timeout seconds, or the connection lost
                    status, times = "timeout", []
                with lock:
                    if status != 200 or not times:
                        errors.append(status)
                        continue
                    ttft.append(times[0] - t0)
                    gaps.extend(b - a_ for a_, b in zip(times, times[1:]))
                    tokens[0] += len(times)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        wall = run_clients(client, conc)
        stop_sampling.set()
        sampler.join()
        rows.append({"concurrency": conc, "requests": conc * a.rounds, "errors": len(errors),
                     "timeouts": errors.count("timeout"), "client_timeout_s": a.client_timeout,
                     "generated_chunks": tokens[0], "wall_s": round(wall, 3),
                     "tokens_per_s": round(tokens[0] / wall, 2),
                     "token_latency_ms_p50": round(1e3 * percentile(gaps, 50), 2) if gaps else None,
                     "token_latency_ms_p99": round(1e3 * percentile(gaps, 99), 2) if gaps else None,
                     "ttft_ms_p50": round(1e3 * statistics.median(ttft), 1) if ttft else None,
                     "state_bytes_per_sequence_min": int(min(per_seq)) if per_seq else None,
                     "state_bytes_per_sequence_max": int(max(per_seq)) if per_seq else None,
                     "rss_bytes_peak": max(peak_rss[0], rss_bytes(srv.pid) or 0),
                     "rss_bytes_end": rss_bytes(srv.pid)})
        print(f"serve_load: throughput C={conc}: {rows[-1]}", file=sys.stderr)
    return rows


# Invalid requests and the status each must get.
def invalid_cases(big):
    p = "/v1/completions"
    return [
        ("malformed json", p, "{not json", 400, "default"),
        ("empty body", p, "", 400, "default"),
        ("wrong type", p, '{"prompt": 5}', 400, "default"),
        ("empty prompt", p, '{"prompt": ""}', 400, "default"),
        ("absurd max_tokens", p, '{"prompt": "x", "max_tokens": 100000000}', 400, "default"),
        ("negative temperature", p, '{"prompt": "x", "temperature": -1}', 400, "default"),
        ("bad conversation id", p, '{"prompt": "x", "conversation_id": "../etc"}', 400, "default"),
        ("unknown model", p, '{"prompt": "x", "model": "gpt-9"}', 404, "default"),
        ("wrong key", p, '{"prompt": "x"}', 401, "wrong"),
        ("no key", p, '{"prompt": "x"}', 401, None),
        ("oversized body", p, json.dumps({"prompt": "x" * big}), 413, "default"),
        ("unknown route", "/v1/embeddings", '{"input": "x"}', 404, "default"),
        ("chat without content", "/v1/chat/completions", '{"messages": [{"role": "user"}]}', 400, "default"),
    ]


def disconnect_mid_stream(srv, prompt):
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 200, "stream": True})
    with socket.create_connection((srv.host, srv.port), timeout=60) as s:
        s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {srv.key}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
        got = b""
        while b"data:" not in got:
            more = s.recv(4096)
            if not more:
                return False
            got += more
    return True


def mixed(srv, a):
    cold_rss = rss_bytes(srv.pid)
    rng = random.Random(1)
    cases = invalid_cases(a.max_body + 1)
    plan = []
    for i in range(a.requests):
        r = rng.random()
        if r < a.invalid_fraction:
            plan.append(("invalid", rng.choice(cases)))
        elif r < a.invalid_fraction + 0.03:
            plan.append(("disconnect", None))
        else:
            plan.append(("valid", {"chat": rng.random() < 0.4, "stream": rng.random() < 0.5,
                                   "max_tokens": rng.randint(1, a.max_tokens),
                                   "prompt": token_prompt(rng, rng.randint(4, a.prompt_tokens), *a.token_range)}))
    # Warm-up (not counted): every worker's first requests touch the weights and the
    # allocator's arenas, so the starting level is the server's working size.
    def warm(i):
        srv.request("POST", "/v1/completions", json.dumps(
            {"model": "m", "prompt": token_prompt(random.Random(i), a.prompt_tokens, *a.token_range),
             "max_tokens": a.max_tokens, "temperature": 0}))
    warmers = [threading.Thread(target=warm, args=(i,)) for i in range(a.workers)]
    for t in warmers:
        t.start()
    for t in warmers:
        t.join()
    time.sleep(1)
    results = {"valid_ok": 0, "valid_failed": [], "invalid_ok": 0, "invalid_wrong": [], "disconnects": 0}
    lock = threading.Lock()
    it = iter(enumerate(plan))
    deadline = time.time() + a.time_limit
    rss = {"cold": cold_rss, "start": rss_bytes(srv.pid), "peak": rss_bytes(srv.pid) or 0}
    m0 = srv.metrics()

    def run_one(kind, spec):
        if kind == "invalid":
            name, path, body, want, key = spec
            status, text = srv.request("POST", path, body, key=key)
            try:
                ok = status == want and json.loads(text)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                ok = False
            with lock:
                if ok:
                    results["invalid_ok"] += 1
                else:
                    results["invalid_wrong"].append((name, status, text[:200]))
        elif kind == "disconnect":
            disconnect_mid_stream(srv, [rng.randrange(*a.token_range) for _ in range(8)])
            with lock:
                results["disconnects"] += 1
        else:
            prompt = spec["prompt"]
            if spec["chat"]:
                body = {"model": "m", "max_tokens": spec["max_tokens"], "temperature": 0.7, "seed": 3,
                        "messages": [{"role": "user", "content": " ".join(f"w{t}" for t in prompt)}]}
                path = "/v1/chat/completions"
            else:
                body = {"model": "m", "max_tokens": spec["max_tokens"], "temperature": 0.7, "seed": 3,
                        "prompt": prompt}
                path = "/v1/completions"
            if spec["stream"] and not spec["chat"]:
                status, _, finish, _ = srv.stream(body)
                ok = status == 200 and finish in ("stop", "length")
            else:
                status, text = srv.request("POST", path, json.dumps(body))
                try:
                    ok = status == 200 and json.loads(text)["choices"][0]["finish_reason"] in ("stop", "length")
                except (ValueError, KeyError, IndexError, TypeError):
                    ok = False
            with lock:
                if ok:
                    results["valid_ok"] += 1
                else:
                    results["valid_failed"].append((path, status))

    def worker():
        while time.time() < deadline:
            with lock:
                nxt = next(it, None)
            if nxt is None:
                return
            try:
                run_one(*nxt[1])
            except OSError as e:  # a refused connection means the server is gone
                with lock:
                    results["valid_failed"].append(("connection", str(e)))
            r = rss_bytes(srv.pid)
            if r:
                with lock:
                    rss["peak"] = max(rss["peak"], r)

    t0 = time.time()
    threads = [threading.Thread(target=worker) for _ in range(a.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    for _ in range(100):  # let cancelled sequences drain
        m = srv.metrics()
        if m.get("oal_sequences_active", 0) == 0:
            break
        time.sleep(0.1)
    time.sleep(2)  # the server trims its heap once idle
    m1 = srv.metrics()
    rss["end"] = rss_bytes(srv.pid)
    n_valid = sum(1 for k, _ in plan if k == "valid")
    n_invalid = sum(1 for k, _ in plan if k == "invalid")
    out = {"requests_planned": len(plan), "valid": n_valid, "invalid": n_invalid,
           "disconnect_clients": results["disconnects"], "wall_s": round(wall, 1),
           "valid_completed": results["valid_ok"], "valid_failed": results["valid_failed"][:10],
           "invalid_answered_correctly": results["invalid_ok"],
           "invalid_wrong": results["invalid_wrong"][:10], "server_alive": srv.alive(),
           "rss_bytes": rss,
           "active_after": m1.get("oal_sequences_active"), "state_bytes_after": m1.get("oal_state_bytes"),
           "saved_conversation_bytes_before": m0.get("oal_conversation_state_bytes"),
           "saved_conversation_bytes_after": m1.get("oal_conversation_state_bytes"),
           "cancelled": m1.get("oal_generations_cancelled_total")}
    print(f"serve_load: mixed: {out}", file=sys.stderr)
    return out


def memory(srv, a):
    rows = []
    rng = random.Random(5)
    for n in a.contexts:
        before = srv.metrics().get("oal_conversation_state_bytes", 0)
        body = {"model": "m", "prompt": token_prompt(rng, n - 1, *a.token_range), "max_tokens": 1,
                "temperature": 0}
        t0 = time.perf_counter()
        status, text = srv.request("POST", "/v1/completions", json.dumps(body))
        wall = time.perf_counter() - t0
        after = srv.metrics().get("oal_conversation_state_bytes", 0)
        rows.append({"context": n, "saved_tokens": n - 1, "status": status, "state_bytes": int(after - before),
                     "prefill_s": round(wall, 2), "rss_bytes": rss_bytes(srv.pid)})
        print(f"serve_load: memory N={n}: {rows[-1]}", file=sys.stderr)
    return rows


def prompt_tokens_read(srv):
    m = srv.metrics()
    for name in ("oal_step_prompt_tokens_total", "llamacpp:prompt_tokens_total"):
        if name in m:
            return m[name]
    return None


def shared_prefix(srv, a):
    rng = random.Random(5)
    system = token_prompt(rng, a.prefix_tokens, *a.token_range)
    own = [token_prompt(rng, a.prompt_tokens, *a.token_range) for _ in range(a.conversations)]
    body = {"model": "m", "max_tokens": 1, "temperature": 0, "prompt": system}
    status, _ = srv.request("POST", "/v1/completions", json.dumps(body), timeout=600)
    if status != 200:
        return {"error": f"the system prompt got status {status}"}
    read_before = prompt_tokens_read(srv)
    peak = [rss_bytes(srv.pid) or 0]
    texts, ttft, errors = [None] * a.conversations, [], []
    lock = threading.Lock()
    done = threading.Event()

    def watch_rss():
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes(srv.pid) or 0)
            done.wait(0.2)

    def client(w):
        for i in range(w, a.conversations, a.workers):
            body = {"model": "m", "prompt": system + own[i], "max_tokens": a.max_tokens,
                    "temperature": 0, "ignore_eos": True}
            t0 = time.perf_counter()
            status, text = srv.request("POST", "/v1/completions", json.dumps(body), timeout=3600)
            with lock:
                if status != 200:
                    errors.append(status)
                    continue
                ttft.append(time.perf_counter() - t0)
                texts[i] = json.loads(text)["choices"][0]["text"]

    watcher = threading.Thread(target=watch_rss, daemon=True)
    watcher.start()
    wall = run_clients(client, a.workers)
    done.set()
    read_after = prompt_tokens_read(srv)
    joined = "\x00".join(t or "" for t in texts)
    return {"conversations": a.conversations, "prefix_tokens": a.prefix_tokens,
            "own_tokens": a.prompt_tokens, "max_tokens": a.max_tokens, "workers": a.workers,
            "errors": len(errors), "wall_s": round(wall, 3),
            "request_ms_p50": round(1e3 * percentile(ttft, 50), 1) if ttft else None,
            "request_ms_p99": round(1e3 * percentile(ttft, 99), 1) if ttft else None,
            "prompt_tokens_read": None if read_after is None or read_before is None
            else read_after - read_before,
            "peak_rss_bytes": peak[0],
            "answers_sha256": hashlib.sha256(joined.encode()).hexdigest()}


def status_line_to_end(sk):
    """Reads a raw socket until the server closes it; its answer's status line."""
    answer = b""
    sk.settimeout(30)
    try:
        while chunk := sk.recv(4096):
            answer += chunk
    except OSError:
        pass
    sk.close()
    return answer.split(b"\r\n", 1)[0].decode(errors="replace")


def idle_flood(srv, a, health):
    m0 = srv.metrics()
    socks, failed = [], 0
    t0 = time.perf_counter()
    for _ in range(a.idle_connections):
        try:
            socks.append(socket.create_connection((srv.host, srv.port), timeout=5))
        except OSError:
            failed += 1
    opened_s = time.perf_counter() - t0
    during = [health() for _ in range(5)]
    for sk in socks:
        sk.close()
    t0 = time.perf_counter()
    while health()["status"] != 200 and time.perf_counter() - t0 < 120:
        time.sleep(0.1)
    back_s = time.perf_counter() - t0
    m1 = srv.metrics()
    delta = lambda name: m1.get(name, 0) - m0.get(name, 0)
    return {"connections": a.idle_connections, "connect_failed": failed,
            "open_s": round(opened_s, 2), "health_while_open": during,
            "health_200_after_close_s": round(back_s, 2),
            "refused": delta("oal_connections_refused_total"),
            "evicted": delta("oal_connections_evicted_total")}


def slow_client(srv):
    """A request sent one byte a second until the server answers or closes."""
    request = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: 60\r\n\r\n" + b'{"model": "m", "prompt": "Once", "max_tokens": 4}'.ljust(60))
    sk = socket.create_connection((srv.host, srv.port), timeout=5)
    t0, sent = time.perf_counter(), 0
    for byte in request:
        try:
            sk.sendall(bytes([byte]))
            sent += 1
        except OSError:
            break
        time.sleep(1.0)
        if select_readable(sk):
            break
    answer = status_line_to_end(sk)
    return {"bytes_sent": sent, "held_s": round(time.perf_counter() - t0, 1), "answer": answer}


def big_body(srv, size=100 << 20):
    """A body of `size` bytes sent in 1 MB pieces until the server answers."""
    piece = b"x" * (1 << 20)
    sk = socket.create_connection((srv.host, srv.port), timeout=30)
    sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               + f"Authorization: Bearer {srv.key}\r\nContent-Length: {size}\r\n\r\n".encode())
    t0, sent = time.perf_counter(), 0
    while sent < size and not select_readable(sk):
        try:
            sk.sendall(piece)
            sent += len(piece)
        except OSError:
            break
    answer = status_line_to_end(sk)
    return {"body_bytes": size, "sent_before_answer": sent,
            "seconds": round(time.perf_counter() - t0, 2), "answer": answer}


def faults(srv, a):
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    warm = {"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}
    srv.request("POST", "/v1/completions", json.dumps(warm))
    rss_warm = rss_bytes(srv.pid)
    peak = [rss_warm or 0]

    def health():
        t0 = time.perf_counter()
        try:
            status, _ = srv.request("GET", "/health", timeout=30)
        except OSError as e:
            status = type(e).__name__
        peak[0] = max(peak[0], rss_bytes(srv.pid) or 0)
        return {"status": status, "ms": round(1e3 * (time.perf_counter() - t0), 1)}

    out = {}
    for name, run in (("idle", lambda: idle_flood(srv, a, health)), ("slow_client", lambda: slow_client(srv)),
                      ("big_body", lambda: big_body(srv))):
        out[name] = run()
        peak[0] = max(peak[0], rss_bytes(srv.pid) or 0)
        print(f"serve_load: faults {name}: {out[name]}", file=sys.stderr)
    return {**out, "rss_warm": rss_warm, "rss_peak": peak[0], "rss_after": rss_bytes(srv.pid),
            "alive": srv.alive()}


def kill9(srv, a):
    # this scenario runs its own servers over one state directory (srv stays idle)
    state_dir = Path(tempfile.mkdtemp(prefix="serve_kill9_"))
    rng = random.Random(9)
    prompts = [token_prompt(rng, a.prompt_tokens, *a.token_range) for _ in range(a.kills)]
    flags = ["--state-dir", str(state_dir), "--max-state-memory", "0"]
    # How long one such request takes on this machine, so that the kills land around its end.
    s = Server(a, flags)
    t0 = time.perf_counter()
    s.request("POST", "/v1/completions", json.dumps(
        {"model": "m", "prompt": token_prompt(rng, a.prompt_tokens, *a.token_range), "max_tokens": 1}))
    t_answer = time.perf_counter() - t0
    s.proc.kill()
    s.proc.wait()
    rounds = []
    for i in range(a.kills):
        s = Server(a, flags)
        body = {"model": "m", "prompt": prompts[i], "max_tokens": 1, "temperature": 0,
                "conversation_id": f"k{i}"}
        answered = {}

        def ask():
            t0 = time.perf_counter()
            try:
                answered["status"], _ = s.request("POST", "/v1/completions", json.dumps(body))
                answered["s"] = round(time.perf_counter() - t0, 3)
            except OSError:
                answered["status"] = "killed"
        asker = threading.Thread(target=ask)
        asker.start()
        # Half the rounds: kill at a random moment around the request's end; the other
        # half: as soon as the state's temporary file appears, plus up to 20 ms (mid-write).
        t0 = time.perf_counter()
        if i % 2 == 0:
            time.sleep(rng.uniform(a.kill_window[0], a.kill_window[1]) * t_answer)
        else:
            pause = rng.uniform(0, 0.02)
            while asker.is_alive() and not any(".tmp." in p.name for p in state_dir.iterdir()):
                time.sleep(0.0005)
            time.sleep(pause)
        delay = time.perf_counter() - t0
        s.proc.kill()
        s.proc.wait()
        asker.join()
        status = answered.get("status"), answered.get("s")
        temps = sorted(p.name for p in state_dir.iterdir() if ".tmp." in p.name)
        rounds.append({"status": status[0], "answer_s": status[1], "killed_after_s": round(delay, 3),
                       "file_present": (state_dir / f"k{i}.state").exists(), "temporaries": temps})
    s = Server(a, flags)
    left = sorted(p.name for p in state_dir.iterdir() if ".tmp." in p.name)
    outcome = {"continued": 0, "fresh": 0, "failed": []}
    for i in range(a.kills):
        body = {"model": "m", "prompt": prompts[i] + [1000], "max_tokens": 1, "temperature": 0,
                "conversation_id": f"k{i}"}
        status, text = s.request("POST", "/v1/completions", json.dumps(body))
        if status != 200:
            outcome["failed"].append({"conversation": i, "status": status, "body": text[:200]})
            continue
        cached = (json.loads(text).get("usage", {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        outcome["continued" if cached else "fresh"] += 1
    alive = s.alive()
    s.stop()
    out = {"kills": a.kills, "prompt_tokens": a.prompt_tokens, "request_s": round(t_answer, 3),
           "kill_window": a.kill_window,
           "answered_before_kill": sum(1 for r in rounds if r["status"] == 200),
           "answer_s": [r["answer_s"] for r in rounds if r["answer_s"]],
           "rounds_with_temporaries_left": sum(1 for r in rounds if r["temporaries"]),
           "files_present_after_kill": sum(1 for r in rounds if r["file_present"]),
           "temporaries_after_restart": left, **outcome, "server_alive": alive}
    print(f"serve_load: kill9: {out}", file=sys.stderr)
    return out


def select_readable(sk):
    import select
    return bool(select.select([sk], [], [], 0)[0])


def ints(s):
    return [int(x) for x in s.split(",") if x]


def main():
    argv = sys.argv[1:]
    serve_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, serve_args = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--oal", default="build/release/oal")
    ap.add_argument("--model")
    ap.add_argument("--url", help="an already running server (http://127.0.0.1:PORT)")
    ap.add_argument("--pid", type=int, help="its process id, for RSS")
    ap.add_argument("--api-key", default="load-key")
    ap.add_argument("--scenario", action="append",
                    choices=["throughput", "mixed", "memory", "shared-prefix", "faults", "kill9"])
    ap.add_argument("--concurrency", type=ints, default=[1, 4, 16])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat-prompts", action="store_true",
                    help="throughput: every round of a client sends its first prompt again")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--client-timeout", type=float, default=600,
                    help="throughput: seconds a client waits for its next byte before it counts the "
                         "request as an error (a timeout)")
    ap.add_argument("--token-range", type=ints, default=[1000, 20000])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--invalid-fraction", type=float, default=0.3)
    ap.add_argument("--max-body", type=int, default=1 << 20, help="the server's --max-body")
    ap.add_argument("--time-limit", type=float, default=1800, help="seconds for the mixed scenario")
    ap.add_argument("--contexts", type=ints, default=[1024, 8192])
    ap.add_argument("--prefix-tokens", type=int, default=2048, help="shared-prefix: the system prompt")
    ap.add_argument("--conversations", type=int, default=1000, help="shared-prefix: conversations")
    ap.add_argument("--idle-connections", type=int, default=10000, help="faults: idle connections")
    ap.add_argument("--kills", type=int, default=20, help="kill9: rounds")
    ap.add_argument("--kill-window", type=lambda v: [float(x) for x in v.split(",")], default=[0.7, 1.5],
                    help="kill9: LO,HI: the kill lands at a uniform LO..HI times one request's time")
    ap.add_argument("--json", action="store_true", help="(output is always JSON on stdout)")
    a = ap.parse_args(argv)
    a.serve_args = serve_args
    if not a.url and not a.model:
        ap.error("give --model (the server is started here) or --url")
    srv = Server(a)
    out = {"server": a.url or f"oal serve --model {a.model} {' '.join(serve_args)}".strip(),
           "cpu": next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                        if l.startswith("model name")), "?"),
           "rss_at_start": rss_bytes(srv.pid)}
    try:
        for s in a.scenario or ["throughput"]:
            out[s] = {"throughput": throughput, "mixed": mixed, "memory": memory,
                      "shared-prefix": shared_prefix, "faults": faults, "kill9": kill9}[s](srv, a)
        out["server_alive_at_end"] = srv.alive()
    finally:
        srv.stop()
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
