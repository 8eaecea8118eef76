#!/usr/bin/env bash
# The peer's serving configuration, in one place for every side-by-side run
# (scripts/serve_bench.sh, scripts/serve_compare.py): llama.cpp's llama-server on
# loopback with 16 slots of 4096 tokens (llama-server divides -c among its slots),
# continuous batching, flash attention, its default f16 KV cache, the machine's threads
# for decode and prompts, API key load-key. Replaces itself with the server (exec), so
# the caller's process id is the server's.
#
#   scripts/llama-server.sh BIN MODEL.gguf PORT [more llama-server flags...]
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: scripts/llama-server.sh BIN MODEL.gguf PORT [FLAGS...]" >&2; exit 2; }
bin=$1 model=$2 port=$3
shift 3
exec "$bin" -m "$model" --host 127.0.0.1 --port "$port" --api-key load-key \
  -c 65536 -np 16 -t "$(nproc)" -tb "$(nproc)" -fa --no-webui "$@"
