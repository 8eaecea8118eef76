#!/usr/bin/env bash
# oal side by side with llama.cpp on the same GGUF file, the same machine and thread
# count, in one run (issue 26): prefill tokens/s at N tokens and decode ms/token at
# context depths, llama.cpp with flash attention on and its default f16 KV cache (its
# best CPU setting), oal with the weights kept as the file stores them (--weights auto)
# for the softmax model, all layers OAL and the paper-range hybrid, with peak RSS.
#
#   scripts/bench-peer.sh [--model FILE.gguf] [--prefill 512,4096] [--depths 1024,4096]
#                         [--threads 2] [--simd avx2] [--repeats 3] [--warmup 1] [--out DIR]
#   scripts/bench-peer.sh --sweep 8192,16384,32768 [...]   # long contexts, one pass per N
#                         [--kv-cache f16|f32|q8_0] [--ubatch 512] [--reuse-peer]
#                         [--sinks S --window W] [--variants softmax,oal,hybrid]
#
# --sinks/--window: oal's converted layers (all-OAL and hybrid rows) are windowed OAL
# (exact sinks and a recent window beside the kernel, docs/adapt.md). --variants: which
# of oal's models to time (default all three; a 32K sweep of only the every-layer model
# saves oal's two slower 32K prefills).
# --kv-cache: the softmax-layer KV cache of both programs (default f16, llama.cpp's
# default; llama.cpp gets -ctk/-ctv of the same type). --ubatch: oal's prefill ubatch (default 512, llama.cpp's; 0 = the whole prompt
# at once). --reuse-peer: keep the llama.cpp outputs already in DIR (same model, threads
# and lengths) and time oal again only.
#
# --sweep N,...: prefill of N tokens and decode at depth N from one llama.cpp pass per N
# (llama-batched-bench: prefill N in ubatches of 512, then 32 tokens generated on that
# context), once each. llama-bench would fill each decode depth again untimed, which
# doubles a 32K run (an hour per SIMD target on 2 cores); both tools time the same
# ubatches, and on SmolLM2 they agree within 3 %. oal runs --prefill-n N --n N, once.
#
# llama.cpp is built from source by scripts/build-llama-cpp.sh (native CPU flags; with
# --simd avx2, a second build with AVX-512 off, so both sides run AVX2). Writes
# DIR/llama-bench.json, DIR/oal-bench.json and DIR/table.md (scripts/peer_table.py);
# prints the table. Turn autogroup off and keep other work off the CPU while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
model=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
prefill=512,4096
depths=1024,4096
threads=$(nproc)
simd=""
repeats=3
warmup=1
out=runs/peer
sweep=""
kv_cache=f16
ubatch=512
sinks=0
window=0
reuse_peer=0
variants=softmax,oal,hybrid
oal=${OAL_BIN:-build/release/oal}
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --prefill) prefill=$2; shift 2 ;;
    --depths) depths=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --simd) simd=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;   # oal's untimed calls per cell (0 for long contexts)
    --out) out=$2; shift 2 ;;
    --sweep) sweep=$2; shift 2 ;;
    --kv-cache) kv_cache=$2; shift 2 ;;
    --ubatch) ubatch=$2; shift 2 ;;
    --reuse-peer) reuse_peer=1; shift ;;
    --sinks) sinks=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "bench-peer: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "bench-peer: $model: no such file (scripts/fetch-models.sh fetches SmolLM2)" >&2; exit 1; }
[ -x "$oal" ] || { echo "bench-peer: $oal not built (make build)" >&2; exit 1; }
case "$simd" in
  "") peer_dir=.cache/peer ;;
  avx2) peer_dir=.cache/peer-avx2 ;;
  *) echo "bench-peer: --simd must be avx2 or empty (native), got '$simd'" >&2; exit 2 ;;
esac
PEER_DIR=$peer_dir PEER_SIMD=$simd bash scripts/build-llama-cpp.sh
mkdir -p "$out"
if [ -r /proc/sys/kernel/sched_autogroup_enabled ] && [ "$(cat /proc/sys/kernel/sched_autogroup_enabled)" != 0 ]; then
  echo "bench-peer: warning: autogroup is on (echo 0 > /proc/sys/kernel/sched_autogroup_enabled)" >&2
fi

# Runs a peer command unless --reuse-peer finds its output already there.
peer_run() {
  local output=$1; shift
  if [ "$reuse_peer" = 1 ] && [ -s "$output" ]; then
    echo "bench-peer: reusing $output" >&2
    return 0
  fi
  "$@"
}

if [ -n "$sweep" ]; then
  prefill=$sweep depths=$sweep repeats=1 warmup=0
  # llama.cpp: per N, prefill N tokens (-b 512 -ub 512, as llama-bench runs) then 32 tokens
  # generated at depth N; the KV cache holds the longest context plus 32 (-c).
  max_n=$(tr ',' '\n' <<< "$sweep" | sort -n | tail -1)
  echo "bench-peer: llama-batched-bench on $model ($threads threads, N = $sweep)" >&2
  sweep_peer() {
    /usr/bin/time -f "%M" -o "$out/llama-sweep.rss-kb" \
      "$peer_dir/bin/llama-batched-bench" -m "$model" -t "$threads" -fa -c $((max_n + 64)) \
      -ctk "$kv_cache" -ctv "$kv_cache" \
      -b 512 -ub 512 -npp "$sweep" -ntg 32 -npl 1 --output-format jsonl 2> "$out/llama-sweep.log" \
      | grep '^{' > "$out/llama-sweep.jsonl"
  }
  peer_run "$out/llama-sweep.jsonl" sweep_peer
  llama_outputs=("$out/llama-sweep.jsonl")
  llama_rss="sweep $(( $(cat "$out/llama-sweep.rss-kb") / 1024 ))"
else
  # llama.cpp: -p N = prefill of N tokens (ubatch 512, as it runs); -n 32 -d D = 32
  # tokens generated after a D-token context. -fa 1: flash attention; KV cache as oal's.
  echo "bench-peer: llama-bench on $model ($threads threads)" >&2
  # Peak RSS: /usr/bin/time over each llama-bench invocation (its largest test).
  prefill_peer() {
    /usr/bin/time -f "%M" -o "$out/llama-bench-prefill.rss-kb" \
      "$peer_dir/bin/llama-bench" -m "$model" -t "$threads" -fa 1 -r "$repeats" \
      -ctk "$kv_cache" -ctv "$kv_cache" -p "$prefill" -n 0 -o json > "$out/llama-bench-prefill.json"
  }
  decode_peer() {
    /usr/bin/time -f "%M" -o "$out/llama-bench-decode.rss-kb" \
      "$peer_dir/bin/llama-bench" -m "$model" -t "$threads" -fa 1 -r "$repeats" \
      -ctk "$kv_cache" -ctv "$kv_cache" -p 0 -n 32 -d "$depths" -o json > "$out/llama-bench-decode.json"
  }
  peer_run "$out/llama-bench-prefill.json" prefill_peer
  peer_run "$out/llama-bench-decode.json" decode_peer
  llama_outputs=("$out/llama-bench-prefill.json" "$out/llama-bench-decode.json")
  llama_rss="prefill $(( $(cat "$out/llama-bench-prefill.rss-kb") / 1024 )), decode $(( $(cat "$out/llama-bench-decode.rss-kb") / 1024 ))"
fi

echo "bench-peer: oal bench --model $model ($threads threads${simd:+, SIMD $simd}, KV cache $kv_cache, ubatch $ubatch)" >&2
OAL_THREADS=$threads "$oal" bench --model "$model" --variants "$variants" \
  --prefill-n "$prefill" --n "$depths" --repeats "$repeats" --warmup "$warmup" --decode-steps 32 \
  ${simd:+--simd "$simd"} --weights auto --kv-cache "$kv_cache" --ubatch "$ubatch" \
  --sinks "$sinks" --window "$window" --json --quiet \
  > "$out/oal-bench.json"

llama_args=()
for f in "${llama_outputs[@]}"; do llama_args+=(--llama "$f"); done
"${OAL_VENV:-.cache/venv}/bin/python" scripts/peer_table.py "${llama_args[@]}" \
  --oal "$out/oal-bench.json" > "$out/table.md"
echo "llama.cpp peak RSS (MiB): $llama_rss" >> "$out/table.md"
cat "$out/table.md"
