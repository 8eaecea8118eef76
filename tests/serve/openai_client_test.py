#!/usr/bin/env python3
"""`oal serve` through the real OpenAI Python client (PyPI `openai`, in the project venv).

Starts `oal serve` on a free loopback port with stories260K (the real llama2.c
checkpoint of ../shared/data) and checks, with the client and with raw HTTP for what
the client cannot send:
  * completions and chat, streaming and not; streamed text equals the whole answer;
  * greedy (temperature 0) answers are identical run to run, and equal `oal generate`'s;
  * a seed reproduces a sampled answer; stop strings are honoured and never sent;
  * 8 concurrent requests all complete, with the text each gives alone;
  * /tokenize and /detokenize: ids equal `oal tokenize`'s, pieces and ids round-trip;
  * bad input: malformed JSON, wrong types, unknown model, empty prompt, absurd
    max_tokens, unknown route, oversized body, wrong API key -> OpenAI-shaped errors
    with their 4xx status; a client that disconnects mid-stream leaves no sequence behind;
  * bounded connections: idle connections hold no HTTP thread; a request beyond
    --http-threads + --http-queue gets 503 at once, one slower than --request-timeout 408;
  * saved conversations: a follow-up continues from the saved states (cached_tokens), a
    server restarted on its --state-dir resumes a conversation with the identical greedy
    continuation, and a corrupt state file is refused (the conversation restarts);
  * SmolLM2-135M-Instruct (when fetched; required under OAL_REQUIRE_SHARED=1): a chat
    answer through its ChatML template and a second turn reusing the first's states.
Exit 0 on success, 77 (ctest: skipped) when the venv or the data is missing and
OAL_REQUIRE_SHARED is not set.
"""
import concurrent.futures
import json
import os
import pathlib
import socket
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
VENV_PY = ROOT / ".cache" / "venv" / "bin" / "python"
REQUIRED = os.environ.get("OAL_REQUIRE_SHARED") == "1"


def skip(why):
    if REQUIRED:
        sys.exit(f"FAIL (OAL_REQUIRE_SHARED=1): {why}")
    print(f"SKIP: {why}")
    sys.exit(77)


# Run under the venv's interpreter, where the openai package is.
if VENV_PY.exists() and pathlib.Path(sys.prefix).resolve() != VENV_PY.parents[1].resolve():
    os.execv(str(VENV_PY), [str(VENV_PY), __file__] + sys.argv[1:])
try:
    import openai
except ImportError:
    skip(f"the openai package is not installed ({VENV_PY}; run scripts/python-venv.sh)")

OAL = pathlib.Path(os.environ.get("OAL_CLI", ROOT / "build" / "release" / "oal"))
MODEL = ROOT.parent / "shared" / "data" / "stories260K.bin"
if not MODEL.exists():
    skip(f"{MODEL} is missing")
if not OAL.exists():
    sys.exit(f"FAIL: {OAL} does not exist (build first, or set OAL_CLI)")

API_KEY = "test-key"


def start_server(tmp, extra=(), log_name="serve.log", model=MODEL, name="stories"):
    port_file = pathlib.Path(tmp) / "port"
    port_file.unlink(missing_ok=True)
    log = open(pathlib.Path(tmp) / log_name, "a")
    proc = subprocess.Popen(
        [str(OAL), "serve", "--model", str(model), "--port", "0", "--port-file", str(port_file),
         "--api-key", API_KEY, "--name", name, "--max-sequences", "4", "--max-body", "4096",
         *extra],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "OAL_THREADS": "1"})
    for _ in range(300):
        if port_file.exists():
            return proc, int(port_file.read_text())
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    sys.exit("FAIL: oal serve did not start:\n" + (pathlib.Path(tmp) / log_name).read_text())


def stop_server(proc, tmp, log_name="serve.log"):
    proc.terminate()
    try:
        rc = proc.wait(timeout=40)
    except subprocess.TimeoutExpired:
        proc.kill()
        sys.exit("FAIL: oal serve did not stop on SIGTERM")
    assert rc == 0, f"oal serve exited with {rc}:\n" + (pathlib.Path(tmp) / log_name).read_text()


def raw(port, method, path, body=None, key=API_KEY, headers=None):
    """(status, parsed JSON or text) of one HTTP request."""
    data = body if isinstance(body, (bytes, type(None))) else body.encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as e:
        text, status = e.read().decode(), e.code
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


def expect_error(port, path, body, status, param=None, key=API_KEY):
    got, j = raw(port, "POST", path, body, key=key)
    assert got == status, f"{path} {body!r}: status {got}, expected {status}: {j}"
    assert isinstance(j, dict) and "error" in j and j["error"]["message"], f"not an OpenAI error: {j}"
    if param is not None:
        assert j["error"]["param"] == param, f"{body!r}: param {j['error']['param']}, expected {param}"


def main():
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_server(tmp)
        try:
            run_checks(port)
        finally:
            stop_server(proc, tmp)
        conversation_checks(tmp)
        moving_checks(tmp)
        connection_checks(tmp)
        smollm2_checks(tmp)
    print("OK")


def smollm2_checks(tmp):
    """The real chat model (SmolLM2-135M-Instruct, GGUF, fetched by scripts/fetch-models.sh):
    its ChatML template from the GGUF metadata, a factual answer, and a second turn that
    continues the first's saved states (the template's turn markers are special tokens,
    so the rendered history re-tokenizes to the ids the states absorbed)."""
    path = ROOT / ".cache" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        if REQUIRED:
            sys.exit(f"FAIL (OAL_REQUIRE_SHARED=1): {path} is missing (scripts/fetch-models.sh)")
        print(f"note: {path} missing: SmolLM2 chat checks skipped")
        return
    proc, port = start_server(tmp, [], "smollm2.log", model=path, name="smollm2")
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, max_retries=0)
        msgs = [{"role": "user", "content": "What is the capital of France?"}]
        r = client.chat.completions.create(model="smollm2", messages=msgs, max_tokens=32, temperature=0,
                                           extra_body={"conversation_id": "smol-1"})
        answer = r.choices[0].message.content
        assert "Paris" in answer, answer
        msgs2 = msgs + [{"role": "assistant", "content": answer},
                        {"role": "user", "content": "And the capital of Italy?"}]
        r2 = client.chat.completions.create(model="smollm2", messages=msgs2, max_tokens=32, temperature=0,
                                            extra_body={"conversation_id": "smol-1"})
        cached = r2.usage.prompt_tokens_details.cached_tokens
        # Everything the first turn's states absorbed: its prompt and every answer token
        # but the last one sampled (the end-of-turn token on a "stop").
        want = r.usage.prompt_tokens + r.usage.completion_tokens - 1
        assert cached == want, f"turn 2 reused {cached} tokens, expected {want} ({r.choices[0].finish_reason})"
        assert r2.choices[0].message.content, r2
    finally:
        stop_server(proc, tmp, "smollm2.log")


def completion(port, prompt, conversation=None, n=16):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, max_retries=0)
    extra = {"conversation_id": conversation} if conversation else None
    r = client.completions.create(model="stories", prompt=prompt, max_tokens=n, temperature=0,
                                  extra_body=extra)
    return r.choices[0].text, r.usage.prompt_tokens_details.cached_tokens, r.model_extra["conversation_id"]


def conversation_checks(tmp):
    """Turn 2 of a story continues turn 1's saved states: without a restart, after one
    (the states written at shutdown and read back), and with the file corrupted."""
    turn1 = "Once upon a time, there was a little girl"
    states = pathlib.Path(tmp) / "states"
    proc, port = start_server(tmp, ["--state-dir", str(states)], "conv.log")
    try:
        reply, cached, cid = completion(port, turn1, "story-1")
        assert cached == 0 and cid == "story-1", (cached, cid)
        turn2 = turn1 + reply + " One day"
        ref, cached2, _ = completion(port, turn2, "story-1")
        assert cached2 > len(turn1.split()), f"turn 2 reused {cached2} tokens"
        # Unnamed requests continue the longest saved prefix and get ids of their own.
        _, _, auto_id = completion(port, "Lily and Tom")
        assert auto_id.startswith("conv-"), auto_id
        expect_error(port, "/v1/completions", '{"prompt": "x", "conversation_id": "../x"}', 400,
                     "conversation_id")
        completion(port, turn1, "story-2")  # saved for the restart below
    finally:
        stop_server(proc, tmp, "conv.log")
    assert (states / "story-2.state").exists(), sorted(p.name for p in states.iterdir())

    proc, port = start_server(tmp, ["--state-dir", str(states)], "conv.log")
    try:
        got, cached, _ = completion(port, turn2, "story-2")
        assert cached == cached2, (cached, cached2)
        assert got == ref, (got, ref)  # the identical greedy continuation
        completion(port, turn1, "story-3")
    finally:
        stop_server(proc, tmp, "conv.log")

    path = states / "story-3.state"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    proc, port = start_server(tmp, ["--state-dir", str(states)], "conv.log")
    try:
        got, cached, _ = completion(port, turn2, "story-3")
        assert cached == 0 and got == ref, (cached, got, ref)  # read again from the prompt
        _, metrics = raw(port, "GET", "/metrics")
        assert "oal_state_restore_failures_total 1" in metrics, metrics
    finally:
        stop_server(proc, tmp, "conv.log")
    assert "refused" in (pathlib.Path(tmp) / "conv.log").read_text()
    assert (states / "story-3.state.corrupt").exists()


def moving_checks(tmp):
    """Conversations that move between servers: two servers over one --state-dir (with
    --max-state-memory 0 each writes a conversation when its request ends); one begun on
    server a continues on server b, which started before the file existed, with the
    greedy text a single server gives; back on a, whose index is stale, it continues from
    b's newer file; a state file copied into a third server's own directory continues
    there with the same text."""
    turn1 = "Once upon a time, there was a little girl"
    fleet, copied = pathlib.Path(tmp) / "fleet", pathlib.Path(tmp) / "copied"
    flags = ["--state-dir", str(fleet), "--max-state-memory", "0"]
    a, port_a = start_server(tmp, flags, "fleet-a.log")
    b = c = None
    try:
        b, port_b = start_server(tmp, flags, "fleet-b.log")  # indexes an empty directory
        reply, _, _ = completion(port_a, turn1, "moving-1")
        assert (fleet / "moving-1.state").exists(), sorted(p.name for p in fleet.iterdir())
        turn2 = turn1 + reply + " One day"
        got2, cached2, _ = completion(port_b, turn2, "moving-1")
        assert cached2 > len(turn1.split()), f"server b reused {cached2} tokens"
        completion(port_a, turn1, "moving-ref")
        ref2, ref_cached2, _ = completion(port_a, turn2, "moving-ref")
        assert (got2, cached2) == (ref2, ref_cached2), (got2, cached2, ref2, ref_cached2)
        turn3 = turn2 + got2 + " Then"
        copied.mkdir()
        shutil.copy(fleet / "moving-1.state", copied / "moving-1.state")
        got3, cached3, _ = completion(port_a, turn3, "moving-1")
        assert cached3 > cached2, f"server a reused {cached3} tokens of b's {cached2}"
        c, port_c = start_server(tmp, ["--state-dir", str(copied)], "copied.log")
        got3c, cached3c, _ = completion(port_c, turn3, "moving-1")
        assert (got3c, cached3c) == (got3, cached3), (got3c, cached3c, got3, cached3)
    finally:
        for proc, log in ((a, "fleet-a.log"), (b, "fleet-b.log"), (c, "copied.log")):
            if proc:
                stop_server(proc, tmp, log)


def connection_checks(tmp):
    """Bounded connections, with 2 HTTP threads, a queue of 1 and --request-timeout 2:
    50 idle connections hold no thread (/health answers 200 beside them); three requests
    that stall half-way through their first line hold both threads and the queue, so a
    fourth request is answered 503 server_busy at once, not queued behind them; the
    stalled ones get 408 after 2 s, and /health answers 200 again. /metrics counts the
    refusal."""
    proc, port = start_server(tmp, ["--http-threads", "2", "--http-queue", "1",
                                    "--request-timeout", "2"], "connections.log")
    try:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
        status, _ = raw(port, "GET", "/health")
        assert status == 200, f"/health beside 50 idle connections: {status}"
        stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        for s in stalled:
            s.sendall(b"GET /hea")
        # Until the server has read them (two threads, one waiting), /health still finds a
        # thread; then it is refused at once.
        deadline = time.monotonic() + 10
        while True:
            t0 = time.monotonic()
            status, j = raw(port, "GET", "/health")
            if status != 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert status == 503 and j["error"]["code"] == "server_busy", (status, j)
        assert "--http-queue" in j["error"]["message"], j
        assert time.monotonic() - t0 < 1.5, "the refusal waited for a thread"
        for s in stalled:
            s.settimeout(10)
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer, answer
            s.close()
        status, _ = raw(port, "GET", "/health")
        assert status == 200, f"/health after the stalled requests: {status}"
        status, metrics = raw(port, "GET", "/metrics")
        assert "oal_connections_refused_total 1" in metrics, metrics
        for s in idle:
            s.close()
    finally:
        stop_server(proc, tmp, "connections.log")


def run_checks(port):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, max_retries=0)
    assert [m.id for m in client.models.list().data] == ["stories"]

    # Completions, whole and streamed; greedy is deterministic and equals `oal generate`.
    prompt = "Once upon a time"
    a = client.completions.create(model="stories", prompt=prompt, max_tokens=24, temperature=0)
    b = client.completions.create(model="stories", prompt=prompt, max_tokens=24, temperature=0)
    assert a.choices[0].text == b.choices[0].text and a.choices[0].text, a
    assert a.usage.completion_tokens == 24 and a.choices[0].finish_reason == "length", a.usage
    gen = subprocess.run([str(OAL), "generate", "--model", str(MODEL), "--prompt", prompt, "-n", "24",
                          "--ignore-eos", "--json"], capture_output=True, text=True, check=True)
    assert json.loads(gen.stdout)["text"] == prompt + a.choices[0].text, (gen.stdout, a.choices[0].text)
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="stories", prompt=prompt, max_tokens=24, temperature=0, stream=True))
    assert streamed == a.choices[0].text, (streamed, a.choices[0].text)

    # A seed reproduces a sampled answer.
    s1 = client.completions.create(prompt=prompt, model="stories", max_tokens=20, temperature=1.0, seed=7)
    s2 = client.completions.create(prompt=prompt, model="stories", max_tokens=20, temperature=1.0, seed=7)
    assert s1.choices[0].text == s2.choices[0].text, (s1, s2)

    # Stop strings: the text ends before the first occurrence, which is not sent.
    word = a.choices[0].text.split()[2]
    st = client.completions.create(model="stories", prompt=prompt, max_tokens=24, temperature=0, stop=[word])
    assert st.choices[0].finish_reason == "stop" and word not in st.choices[0].text
    assert a.choices[0].text.startswith(st.choices[0].text), (st.choices[0].text, a.choices[0].text)

    # Chat, whole and streamed (the plain format: stories260K has no chat template).
    msgs = [{"role": "user", "content": "Lily went to the park."}]
    c = client.chat.completions.create(model="stories", messages=msgs, max_tokens=16, temperature=0)
    assert c.choices[0].message.role == "assistant" and c.choices[0].message.content
    chunks = list(client.chat.completions.create(model="stories", messages=msgs, max_tokens=16,
                                                 temperature=0, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == c.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason in ("length", "stop")

    # 8 concurrent requests (4 slots: the rest queue), each with the text it gives alone.
    prompts = [f"Once upon a time, {name}" for name in
               ["Tom", "Lily", "a cat", "the sun", "Ben", "a dog", "Sue", "a tree"]]
    alone = [client.completions.create(model="stories", prompt=p, max_tokens=12, temperature=0).choices[0].text
             for p in prompts]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda p: client.completions.create(
            model="stories", prompt=p, max_tokens=12, temperature=0).choices[0].text, prompts))
    assert together == alone, (together, alone)

    # /tokenize and /detokenize (llama-server's routes), through the client's own HTTP
    # layer (it has no method for them): ids equal `oal tokenize`'s, and round-trip.
    root = client.with_options(base_url=f"http://127.0.0.1:{port}")
    tok = root.post("/tokenize", body={"content": prompt, "add_special": True}, cast_to=object)
    cli = subprocess.run([str(OAL), "tokenize", "--tokenizer", str(MODEL.parent / "tok512.bin"),
                          "--text", prompt, "--bos", "--json"],
                         capture_output=True, text=True, check=True)
    assert tok["tokens"] == json.loads(cli.stdout)["ids"], (tok, cli.stdout)
    pieces = root.post("/tokenize", body={"content": prompt, "with_pieces": True}, cast_to=object)
    assert "".join(p["piece"] for p in pieces["tokens"]) == prompt, pieces
    back = root.post("/detokenize", body={"tokens": [p["id"] for p in pieces["tokens"]]},
                     cast_to=object)
    assert back == {"content": prompt}, back
    assert root.post("/tokenize", body={"content": ""}, cast_to=object) == {"tokens": []}
    expect_error(port, "/tokenize", '{"content": 5}', 400, "content")
    expect_error(port, "/detokenize", '{"tokens": [1, -2]}', 400, "tokens")
    expect_error(port, "/detokenize", '{"tokens": [100000]}', 400, "tokens")
    expect_error(port, "/tokenize", '{"content": "x"}', 401, key="wrong")

    # Bad input: OpenAI-shaped errors with their status.
    comp = "/v1/completions"
    expect_error(port, comp, "{not json", 400)
    expect_error(port, comp, "", 400)
    expect_error(port, comp, '{"prompt": 5}', 400, "prompt")
    expect_error(port, comp, '{"prompt": ""}', 400, "prompt")
    expect_error(port, comp, '{"prompt": "x", "max_tokens": -1}', 400, "max_tokens")
    expect_error(port, comp, '{"prompt": "x", "max_tokens": 100000000}', 400, "max_tokens")
    expect_error(port, comp, '{"prompt": "x", "max_tokens": 4000}', 400, "max_tokens")  # > context 512
    expect_error(port, comp, '{"prompt": "x", "temperature": "hot"}', 400, "temperature")
    expect_error(port, comp, '{"prompt": "x", "model": "gpt-4"}', 404, "model")
    expect_error(port, comp, '{"prompt": "x"}', 401, key="wrong")
    expect_error(port, comp, '{"prompt": "x"}', 401, key=None)
    expect_error(port, comp, json.dumps({"prompt": "x" * 5000}), 413)
    expect_error(port, "/v1/chat/completions", '{"messages": [{"role": "user"}]}', 400, "messages[0].content")
    expect_error(port, "/v1/nothing", "{}", 404)
    try:
        client.completions.create(model="stories", prompt="x", max_tokens=0)
        raise AssertionError("max_tokens=0 accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400

    # A client that goes away mid-stream: its sequence is dropped, nothing leaks.
    with socket.create_connection(("127.0.0.1", port)) as s:
        body = json.dumps({"prompt": prompt, "max_tokens": 400, "stream": True})
        s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {API_KEY}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
        got = b""
        while b"data:" not in got:  # the headers may come in a packet of their own
            more = s.recv(4096)
            assert more, f"connection closed before the first event: {got!r}"
            got += more
    for _ in range(100):
        status, health = raw(port, "GET", "/health")
        if health["active"] == 0:
            break
        time.sleep(0.1)
    assert health == {"status": "ok", "active": 0, "queued": 0}, health
    status, metrics = raw(port, "GET", "/metrics")
    assert status == 200 and "oal_generations_cancelled_total 1" in metrics, metrics
    assert 'oal_requests_total{route="/v1/completions",status="400"}' in metrics
    assert "oal_state_bytes 0" in metrics
    # Per-slot gauges are declared; with no active sequence they hold no sample.
    assert "# TYPE oal_slot_tokens gauge" in metrics and "oal_slot_tokens{" not in metrics, metrics


if __name__ == "__main__":
    main()
