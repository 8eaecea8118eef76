#!/usr/bin/env bash
# docs/serve.md's measurements: `oal serve` on SmolLM2-135M-Instruct (the GGUF as
# shipped = softmax, the paper-range hybrid and the all-OAL model converted from it) and
# llama.cpp's llama-server on the same GGUF file — same machine, loopback, the CPU's
# threads for both, one server at a time — through scripts/serve_load.py.
#
#   throughput   1, 4 and 16 concurrent clients, 2 streamed completions each of 64 tokens
#                (ignore_eos) after 128-token prompts: tokens/s, p50/p99 per-token latency
#   memory       a fresh server per model, one conversation each of 1K / 4K / 8K
#                positions: its saved state bytes
#   long16       softmax and all-OAL: 16 conversations of 2048-token prompts at once,
#                state bytes per sequence sampled while they run
#   mixed        all-OAL: 1000 requests, ~30% invalid and ~3% clients leaving mid-stream,
#                8 clients, --max-state-memory 0 (nothing kept after a request): every
#                answer checked, RSS before / peak / after
#   peer         llama-server, the throughput and long16 scenarios (16 slots of 4096,
#                continuous batching, flash attention, f16 KV cache)
#   shared       softmax: SHARED_N conversations (default 48) that start with one 2048-token
#                system prompt (32 tokens of their own, 16 generated, 16 clients): oal with
#                its saved prefix shared, oal with nothing kept (--max-state-memory 0: every
#                request reads its whole prompt), and llama-server (its per-slot prompt
#                cache; --metrics for the prompt tokens it read); oal with --prefill-chunk 256:
#                2K-token prompts read 16 tokens per step beside 15 decoding rows take minutes
# (The short-context table is scripts/serve_compare.py's; serve.md gives its command.)
#
# Needs the converted models of `STEPS=convert scripts/smollm2_paper.sh` (or any
# conv-oal-all / conv-oal-hybrid under CONV) and the peer of scripts/build-llama-cpp.sh.
# Environment: OAL=build/release/oal OUT=runs/serve CONV=runs/smollm2 STEPS="..."
set -euo pipefail
cd "$(dirname "$0")/.."
OAL=${OAL:-build/release/oal}
OUT=${OUT:-runs/serve}
CONV=${CONV:-runs/smollm2}
STEPS=${STEPS:-throughput memory long16 mixed peer}
M=${OAL_MODEL_CACHE:-.cache/models}/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$M" ] || bash scripts/fetch-models.sh
mkdir -p "$OUT"
load() { python3 scripts/serve_load.py "$@"; }
variant() {  # the model file or directory of a variant
  case $1 in
    softmax) echo "$M" ;;
    hybrid) echo "$CONV/conv-oal-hybrid" ;;
    all) echo "$CONV/conv-oal-all" ;;
  esac
}
throughput=(--scenario throughput --concurrency 1,4,16 --rounds 2 --prompt-tokens 128 --max-tokens 64)

shared=(--scenario shared-prefix --conversations "${SHARED_N:-48}" --prefix-tokens 2048
        --prompt-tokens 32 --max-tokens 16 --workers 16)
start_peer() {  # start_peer LOG ARGS...: llama-server started on a free port; sets port and pid
  bash scripts/build-llama-cpp.sh
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  bash scripts/llama-server.sh .cache/peer/bin/llama-server "$M" "$port" "${@:2}" > "$OUT/$1" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT  # serve_load.py --url waits for its /health
}

for step in $STEPS; do
  case $step in
    throughput)
      for v in softmax hybrid all; do
        load --oal "$OAL" --model "$(variant $v)" "${throughput[@]}" -- --max-sequences 16 > "$OUT/$v.json"
      done ;;
    memory)
      for v in softmax hybrid all; do
        load --oal "$OAL" --model "$(variant $v)" --scenario memory --contexts 1024,4096,8192 \
          -- --max-state-memory 4GiB > "$OUT/memory-$v.json"
      done ;;
    long16)
      for v in softmax all; do
        load --oal "$OAL" --model "$(variant $v)" --scenario throughput --concurrency 16 --rounds 1 \
          --prompt-tokens 2048 --max-tokens 64 -- --max-sequences 16 > "$OUT/long16-$v.json"
      done ;;
    mixed)
      load --oal "$OAL" --model "$CONV/conv-oal-all" --scenario mixed --requests 1000 --workers 8 \
        --max-tokens 16 --prompt-tokens 64 -- --max-sequences 8 --max-state-memory 0 > "$OUT/mixed.json" ;;
    peer)
      start_peer llama-server.log
      load --url "http://127.0.0.1:$port" --pid "$pid" "${throughput[@]}" > "$OUT/llama-server.json"
      load --url "http://127.0.0.1:$port" --pid "$pid" --scenario throughput --concurrency 16 --rounds 1 \
        --prompt-tokens 2048 --max-tokens 64 > "$OUT/long16-llama-server.json"
      kill "$pid"; wait "$pid" 2>/dev/null || true ;;
    shared)
      load --oal "$OAL" --model "$M" "${shared[@]}" -- --max-sequences 16 --prefill-chunk 256 --max-state-memory 4GiB \
        > "$OUT/shared-oal.json"
      load --oal "$OAL" --model "$M" "${shared[@]}" -- --max-sequences 16 --prefill-chunk 256 --max-state-memory 0 \
        > "$OUT/shared-oal-unshared.json"
      start_peer llama-server-shared.log --metrics
      load --url "http://127.0.0.1:$port" --pid "$pid" "${shared[@]}" > "$OUT/shared-llama-server.json"
      kill "$pid"; wait "$pid" 2>/dev/null || true
      trap - EXIT ;;
    *) echo "serve_bench: unknown step '$step'" >&2; exit 2 ;;
  esac
done
echo "serve_bench: results in $OUT" >&2
