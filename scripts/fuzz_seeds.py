#!/usr/bin/env python3
"""Builds the fuzz seed corpora (one directory per fuzz target) under OUT.

Seeds come from three places, never copied into the project (they are generated at run
time, into the build directory):
  * the project's own writers (fuzz_seed_writer: kernel JSON, analysis.json, a
    calibration run directory, a fine-tuning checkpoint, plain and converted model
    directories of a tiny synthetic model);
  * the real files in ../shared/data (see its README), cut down where they are large:
    the llama2.c tokenizer whole, the llama2.c model header and a truncated prefix, the
    Qwen / Llama-3 tokenizer.json reduced to their first ids and the merges among them,
    the official kernel file reduced to two layers;
  * small files written here for layouts no writer produces (a consistent tiny llama2.c
    checkpoint, safetensors with other dtypes and metadata, JSONL for `oal eval`).
Missing shared data only drops its seeds (with a note), unless --require-shared.

Usage: fuzz_seeds.py --out DIR --seed-writer BUILD/fuzz/fuzz_seed_writer [--shared DIR]
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEPARATOR = b"\n--oal-fuzz-part--\n"  # fuzz/fuzz_input.h k_part_separator


def write(out, target, name, data):
    path = Path(out) / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None):
    """tensors: name -> (dtype, shape, raw bytes)."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def floats(n, scale=0.02):
    return struct.pack(f"<{n}f", *[scale * ((i * 7919) % 97 - 48) / 48 for i in range(n)])


def safetensors_seeds(out):
    write(out, "safetensors", "dtypes.safetensors", safetensors({
        "a": ("F32", [2, 3], floats(6)),
        "b": ("BF16", [4], b"\x80\x3f" * 4),
        "c": ("F16", [1, 2], b"\x00\x3c" * 2),
        "d": ("I64", [2], struct.pack("<2q", 1, -2)),
        "e": ("U8", [3], b"\x01\x02\x03"),
        "f": ("BOOL", [2], b"\x00\x01"),
        "g": ("F64", [], struct.pack("<d", 3.5)),
    }, {"format": "pt", "note": "fuzz seed"}))
    write(out, "safetensors", "empty.safetensors", safetensors({}))


def llama2c_model(dim, hidden, layers, heads, kv_heads, vocab, seq_len):
    """A consistent legacy checkpoint (negative vocab: untied classifier)."""
    v, hs = abs(vocab), dim // heads
    kv = kv_heads * hs
    n = (v * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * hidden * dim)
         + dim + seq_len * hs + (v * dim if vocab < 0 else 0))
    return struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq_len) + floats(n)


def llama2c_model_seeds(out, shared):
    write(out, "llama2c_model", "tiny-tied.bin", llama2c_model(8, 12, 1, 2, 1, 32, 8))
    write(out, "llama2c_model", "tiny-untied.bin", llama2c_model(8, 12, 2, 2, 2, -32, 4))
    real = shared / "stories260K.bin"
    if real.exists():
        data = real.read_bytes()
        write(out, "llama2c_model", "stories260K-header.bin", data[:28])
        write(out, "llama2c_model", "stories260K-prefix.bin", data[:4096])
    return real


def reduced_tokenizer(path, keep_ids=600, keep_added=4):
    """tokenizer.json with ids < keep_ids, the merges among them and the first
    keep_added added tokens, renumbered keep_ids, keep_ids + 1, ... so the vocabulary
    stays dense as real ones are (the loader refuses ids far beyond the tokens listed).
    Returns the JSON text and the map old added-token id -> new id."""
    j = json.loads(path.read_text(encoding="utf-8"))
    j["added_tokens"] = j["added_tokens"][:keep_added]
    renumbered = {}
    for k, t in enumerate(j["added_tokens"]):
        renumbered[t["id"]] = keep_ids + k
        t["id"] = keep_ids + k
    vocab = {t: i for t, i in j["model"]["vocab"].items() if i < keep_ids}
    merges = []
    for m in j["model"]["merges"]:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    j["model"]["vocab"] = vocab
    j["model"]["merges"] = merges
    return json.dumps(j, ensure_ascii=False), renumbered


def tokenizer_seeds(out, shared):
    used = []
    tok = shared / "tok512.bin"
    if tok.exists():
        write(out, "llama2c_tokenizer", "tok512.bin", tok.read_bytes())
        used.append(tok)
    for name in ("qwen-tokenizer", "llama3-tokenizer"):
        d = shared / name
        if not (d / "tokenizer.json").exists():
            continue
        small, renumbered = reduced_tokenizer(d / "tokenizer.json")
        write(out, "tokenizer_json", f"{name}.json", small)
        config = json.loads((d / "tokenizer_config.json").read_text(encoding="utf-8"))
        decoder = config.get("added_tokens_decoder", {})
        config["added_tokens_decoder"] = {str(renumbered[int(i)]): t for i, t in decoder.items()
                                          if int(i) in renumbered}
        config.pop("chat_template", None)  # long, and no parser reads it
        write(out, "tokenizer_config", name,
              json.dumps(config).encode() + SEPARATOR + small.encode())
        used.append(d)
    return used


def official_kernel_seed(out, shared):
    path = shared / "official-oal-qwen2.5-0.5b.json"
    if not path.exists():
        return None
    j = json.loads(path.read_text())
    j["layers"] = {k: v for k, v in j["layers"].items() if k in ("0", "1")}
    for layer in j["layers"].values():  # three heads each keeps the seed small
        layer["heads"] = {k: v for k, v in layer["heads"].items() if k in ("0", "1", "2")}
    write(out, "kernel_json", "official-2-layers.json", json.dumps(j))
    return path


def hf_config_seeds(out):
    base = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "vocab_size": 300, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
            "bos_token_id": 1, "eos_token_id": [2, 3], "tie_word_embeddings": True,
            "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}
    write(out, "hf_config", "llama3-scaling.json", json.dumps(base))
    qwen = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
            "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
            "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
            "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
            "hidden_act": "silu", "use_sliding_window": False, "sliding_window": 32768}
    write(out, "hf_config", "qwen2.5-0.5b-shape.json", json.dumps(qwen))


def eval_jsonl_seeds(out):
    tasks = {"piqa": 0, "hellaswag": 1, "arc_easy": 2}
    for f in sorted((ROOT / "tests" / "eval" / "data").glob("*.jsonl")):
        task = next((v for k, v in tasks.items() if f.name.startswith(k)), 0)
        write(out, "eval_jsonl", f.stem, bytes([task]) + f.read_bytes())


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_seeds(out):
    """A GGUF file with one tensor of every block type the dequantizer knows (random
    bytes: fp16 scales may be NaN, which only the values see) and every metadata value
    type, nested arrays included; the seed writer adds whole tiny models."""
    # (ggml type id, block elements, block bytes): F32 F16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0
    # Q2_K Q3_K Q4_K Q5_K Q6_K BF16
    types = [(0, 1, 4), (1, 1, 2), (2, 32, 18), (3, 32, 20), (6, 32, 22), (7, 32, 24), (8, 32, 34),
             (10, 256, 84), (11, 256, 110), (12, 256, 144), (13, 256, 176), (14, 256, 210), (30, 1, 2)]
    kv = [("general.architecture", 8, gguf_string("llama")),
          ("u8", 0, b"\x07"), ("i16", 3, struct.pack("<h", -3)), ("f64", 12, struct.pack("<d", 0.5)),
          ("flag", 7, b"\x01"), ("i64", 11, struct.pack("<q", -1)),
          ("words", 9, struct.pack("<IQ", 8, 2) + gguf_string("a") + gguf_string("b c")),
          ("nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 5, 2) + struct.pack("<ii", 1, 2))]
    body = b"GGUF" + struct.pack("<IQQ", 3, len(types), len(kv))
    for key, t, value in kv:
        body += gguf_string(key) + struct.pack("<I", t) + value
    offset, blobs, rng = 0, [], random.Random(7)
    for t, block, nbytes in types:
        n = 256 if block == 256 else 64
        raw = bytes(rng.getrandbits(8) for _ in range(n // block * nbytes))
        body += gguf_string(f"t{t}") + struct.pack("<IQIQ", 1, n, t, offset)
        blobs.append(raw + b"\0" * (-len(raw) % 32))
        offset += len(blobs[-1])
    body += b"\0" * (-len(body) % 32)
    write(out, "gguf", "every-type.gguf", body + b"".join(blobs))


def state_file(identity, conv_id, tokens, layers):
    """An oal serve state file (src/oal/serve/state_file.h): layers is a list of lists of
    (name, dtype, shape, raw bytes)."""
    header_layers, payload = [], b""
    for tensors in layers:
        entries = []
        for name, dtype, shape, raw in tensors:
            entries.append({"name": name, "dtype": dtype, "shape": shape, "offset": len(payload),
                            "bytes": len(raw)})
            payload += raw
        header_layers.append({"tokens": len(tokens), "tensors": entries})
    header = json.dumps({"identity": identity, "id": conv_id, "tokens": tokens,
                         "layers": header_layers}).encode()
    body = b"OALSTATE" + struct.pack("<IQ", 1, len(header)) + header + payload
    h = 1469598103934665603  # FNV-1a 64, as src/oal/core/fnv1a.h
    for byte in body:
        h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return body + struct.pack("<Q", h)


def state_file_seeds(out):
    """Saved conversations under the fuzz target's identity: a KV-cache layer and an HD
    layer with every dtype, an empty conversation state, and one under another identity."""
    kv = [("k", "f32", [1, 1, 3, 2], struct.pack("<6f", *range(6))),
          ("v", "f16", [1, 1, 3, 2], b"\0\x3c" * 6)]
    hd = [("S", "f64", [1, 1, 6, 3], struct.pack("<18d", *range(18)))]
    feat = [("S", "bf16", [1, 2, 2, 1], b"\x80\x3f" * 4), ("z", "f32", [1, 2, 2], struct.pack("<4f", 1, 2, 3, 4))]
    write(out, "state_file", "hybrid.state", state_file("fuzz-identity", "conv-1", [5, 6, 7], [kv, hd]))
    write(out, "state_file", "feature.state", state_file("fuzz-identity", "c_2", [1, 2], [feat]))
    write(out, "state_file", "empty.state", state_file("fuzz-identity", "e", [], [[]]))
    write(out, "state_file", "other-model.state", state_file("other", "conv-1", [5, 6, 7], [kv]))


def windowed_state_seeds(out):
    """Windowed layers (fuzz/fuzz_windowed_state.cpp: S = 2, W = 3, d = 4, one KV head):
    a state past its window (sinks, a full ring and the HD state), one still filling its
    ring, one whose ring is one row short of its token count, and past-window states of
    the two feature-map layers."""
    def rows(name, n):
        return (name, "f32", [1, 1, n, 4], struct.pack(f"<{4 * n}f", *[0.1 * i for i in range(4 * n)]))
    hd = ("S", "f32", [1, 1, 15, 5], struct.pack("<75f", *[0.01 * i for i in range(75)]))
    full = [rows("sink_k", 2), rows("sink_v", 2), rows("ring_k", 3), rows("ring_v", 3), hd]
    filling = [rows("sink_k", 2), rows("sink_v", 2), rows("ring_k", 1), rows("ring_v", 1)]
    write(out, "windowed_state", "past-window.state", state_file("fuzz-identity", "w", list(range(7)), [full]))
    write(out, "windowed_state", "filling.state", state_file("fuzz-identity", "w", [1, 2, 3], [filling]))
    write(out, "windowed_state", "short-ring.state", state_file("fuzz-identity", "w", list(range(4)), [filling]))
    # Over TaylorShift (15 fp32 features of d = 4, one key-feature head) and Performer (8
    # fp64 features, a key-feature head per query head, with its key shift).
    def feats(name, dtype, shape):
        n = 1
        for x in shape:
            n *= x
        code = "d" if dtype == "f64" else "f"
        return (name, dtype, shape, struct.pack(f"<{n}{code}", *[0.01 * (i + 1) for i in range(n)]))
    for tag, dtype, hf, f in (("taylorshift", "f32", 1, 15), ("performer", "f64", 2, 8)):
        state = full[:4] + [feats("ring_phi", dtype, [1, hf, 3, f]), feats("S", dtype, [1, hf, f, 4]),
                            feats("z", dtype, [1, hf, f]), feats("log_shift", dtype, [1, hf])]
        write(out, "windowed_state", f"{tag}-past-window.state",
              state_file("fuzz-identity", "w", list(range(7)), [state]))
    # The kept-head layer's snapshot: the windowed tensors and the KV head's whole cache.
    kept = full + [rows("full_k", 7), rows("full_v", 7)]
    write(out, "windowed_state", "full-heads.state", state_file("fuzz-identity", "w", list(range(7)), [kept]))


def layer_scores_seeds(out):
    """`oal layer-scores --out` files: three scored layers, one with a single head, and two
    with retrieval masses."""
    def scores(layers, retrieval=False):
        def layer(l, h):
            j = {"layer": l, "mass_beyond_window": sum(h) / len(h), "heads": h}
            if retrieval:
                j["retrieval"] = [x / 2 for x in h]
            return j
        return json.dumps({"format": "oal-layer-scores", "version": 1, "sinks": 4, "window": 64,
                           "ctx": 1024, "sequences": 8, "layers": [layer(l, h) for l, h in layers]})
    write(out, "layer_scores", "three.json", scores([(3, [0.1, 0.2]), (5, [0.4, 0.0]), (9, [0.3, 0.3])]))
    write(out, "layer_scores", "one.json", scores([(0, [0.5])]))
    write(out, "layer_scores", "retrieval.json", scores([(3, [0.1, 0.2]), (5, [0.4, 0.0])], retrieval=True))


def openai_request_seeds(out):
    """Request bodies of `oal serve`: byte 0 picks the parser (0 completions, 1 chat,
    2 /tokenize, 3 /detokenize), as fuzz/fuzz_openai_request.cpp reads them."""
    bodies = [
        (0, {"model": "m", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.7,
             "top_p": 0.9, "top_k": 40, "seed": 3, "stop": ["\n", "."], "stream": True}),
        (0, {"prompt": [1, 2, 3], "ignore_eos": True, "conversation_id": "abc-1"}),
        (1, {"messages": [{"role": "system", "content": "Be brief."},
                          {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
             "max_completion_tokens": 8}),
        (2, {"content": "Hello world", "add_special": True, "with_pieces": True}),
        (3, {"tokens": [0, 1, 2, 49151]}),
    ]
    for i, (parser, body) in enumerate(bodies):
        write(out, "openai_request", f"body{i}.bin", bytes([parser]) + json.dumps(body).encode())


def http_connection_seeds(out):
    """What clients send on one connection (fuzz/fuzz_http_connection.cpp: routes GET /hello,
    POST /echo, a 64-byte body limit): one request, two pipelined, a body at the limit,
    one announced over it, a chunked body, one without a length, "Expect: 100-continue",
    headers cut short."""
    conns = {
        "get": b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
        "pipelined": b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 3\r\n\r\nabcGET /nothing HTTP/1.1\r\n\r\n",
        "at-limit": b"POST /echo HTTP/1.1\r\nContent-Length: 64\r\n\r\n" + b"x" * 64,
        "over-limit": b"POST /echo HTTP/1.1\r\nContent-Length: 104857600\r\n\r\nxyz",
        "chunked": b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "unsized": b"POST /echo HTTP/1.1\r\nHost: x\r\n\r\nbody until close",
        "expect": b"POST /echo HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\nabcd",
        "cut": b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: clo",
    }
    for name, data in conns.items():
        write(out, "http_connection", f"{name}.http", data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed-writer", required=True, type=Path)
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--require-shared", action="store_true")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(a.seed_writer), str(a.out)], check=True)
    safetensors_seeds(a.out)
    hf_config_seeds(a.out)
    eval_jsonl_seeds(a.out)
    gguf_seeds(a.out)
    state_file_seeds(a.out)
    windowed_state_seeds(a.out)
    layer_scores_seeds(a.out)
    openai_request_seeds(a.out)
    http_connection_seeds(a.out)
    shared_used = [llama2c_model_seeds(a.out, a.shared), official_kernel_seed(a.out, a.shared)]
    shared_used += tokenizer_seeds(a.out, a.shared)
    if not (a.shared / "tok512.bin").exists():
        msg = f"fuzz_seeds: no shared data in {a.shared}: seeds from real files left out"
        if a.require_shared:
            sys.exit(msg)
        print(msg, file=sys.stderr)
    for d in sorted(p for p in a.out.iterdir() if p.is_dir() and not p.name.startswith(".")):
        print(f"fuzz_seeds: {d.name}: {sum(1 for _ in d.iterdir())} seeds")


if __name__ == "__main__":
    main()
