#!/usr/bin/env bash
# Runs every fuzz target (fuzz/, built by `make fuzz-build`) for N seconds each, seeded
# from corpora that scripts/fuzz_seeds.py writes into the build directory, and prints
# one line per target: seconds, executions, coverage (libFuzzer's cov: and ft:), corpus
# size. Fails when any target finds a crash, hang, leak or sanitizer report; the input
# that triggered it is left in BUILD/fuzz-artifacts/<target>/ (reproduce with
# `BUILD/fuzz/fuzz_<target> FILE`).
#   scripts/fuzz.sh [--build DIR] [--seconds N] [--jobs J] [--targets "a b ..."]
#                   [--require-shared]
# --jobs J runs J targets at a time (one core each; default 1). --require-shared is
# implied by OAL_REQUIRE_SHARED=1.
# The corpus each run grows (BUILD/fuzz-corpus/<target>) is kept for the next run.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/fuzz
seconds=10
jobs=1
targets="safetensors hf_config tokenizer_json tokenizer_config llama2c_tokenizer llama2c_model
converted_model kernel_json analysis_json run_dir checkpoint eval_jsonl gguf state_file
windowed_state layer_scores openai_request http_connection"
seed_flags=()
# CI (.ci/run) sets OAL_REQUIRE_SHARED=1: seeds from ../shared/data must then exist.
[ "${OAL_REQUIRE_SHARED:-0}" = 1 ] && seed_flags+=(--require-shared)
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --require-shared) seed_flags+=(--require-shared); shift ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

seeds=$build/fuzz-seeds
rm -rf "$seeds"
python3 scripts/fuzz_seeds.py --out "$seeds" --seed-writer "$build/fuzz/fuzz_seed_writer" \
  "${seed_flags[@]}" >/dev/null

# Any sanitizer report ends the run (the build already makes UBSan reports fatal).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# One thread per fuzz process: LibTorch's pools only add noise (and cores are few).
export OMP_NUM_THREADS=1

# One target: runs it and writes its report row to $rows/<target> (result "ok" or
# "FAILED ..."). Always succeeds, so parallel jobs never stop the script midway.
rows=$build/fuzz-rows
rm -rf "$rows"
mkdir -p "$rows"
run_target() {
  local t=$1 exe=$build/fuzz/fuzz_$1 corpus=$build/fuzz-corpus/$1
  local artifacts=$build/fuzz-artifacts/$1/ log=$build/fuzz-logs/$1.log
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")" "$seeds/$t"
  local rc=0
  "$exe" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$artifacts" "$corpus" "$seeds/$t" >"$log" 2>&1 || rc=$?
  local last execs cov ft files result=ok
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  files=$(find "$corpus" -type f | wc -l)
  [ "$rc" -ne 0 ] && result="FAILED (rc $rc, see $log)"
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$t" "$seconds" "${execs:-?}" "${cov:-?}" \
    "${ft:-?}" "$files" "$result" >"$rows/$t"
  cat "$rows/$t"
}

for t in $targets; do
  [ -x "$build/fuzz/fuzz_$t" ] || { echo "fuzz.sh: $build/fuzz/fuzz_$t not built (make fuzz-build)" >&2; exit 2; }
done
running=0
for t in $targets; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
wait

# The report in the order the targets were given.
report=$build/fuzz-report.md
printf '| target | seconds | execs | cov | ft | corpus (files) | result |\n|---|---|---|---|---|---|---|\n' >"$report"
failed=()
for t in $targets; do
  cat "$rows/$t" >>"$report"
  grep -q '| FAILED' "$rows/$t" && failed+=("$t")
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in: ${failed[*]} (inputs in $build/fuzz-artifacts/)" >&2
  for t in "${failed[@]}"; do grep -m1 -E 'ERROR|runtime error|deadly signal|uncaught|timeout' \
    "$build/fuzz-logs/$t.log" >&2 || true; done
  exit 1
fi
echo "fuzz.sh: all targets clean ($report)"
