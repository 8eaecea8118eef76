#!/usr/bin/env bash
# Runs test executables of the sanitizer build (`make fuzz-build`: clang, ASan + UBSan,
# every report fatal) from the source root, as ctest does, and fails on any failed test
# or sanitizer report. Prints each module's test count and wall time.
#   scripts/test_asan.sh [--build DIR] MODULE...   (e.g. core io text)
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/fuzz
if [ "${1:-}" = "--build" ]; then build=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: scripts/test_asan.sh [--build DIR] MODULE..." >&2; exit 2; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

total=0
for m in "$@"; do
  exe=$build/tests/test_$m
  [ -x "$exe" ] || { echo "test_asan.sh: $exe not built" >&2; exit 2; }
  start=$(date +%s)
  log=$build/asan-logs/$m.log
  mkdir -p "$(dirname "$log")"
  if ! "$exe" --gtest_brief=1 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "test_asan.sh: test_$m failed under ASan+UBSan (log: $log)" >&2
    exit 1
  fi
  n=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log")
  total=$((total + ${n:-0}))
  echo "test_asan.sh: test_$m: ${n:-?} tests passed in $(($(date +%s) - start)) s"
done
echo "test_asan.sh: $total tests passed under ASan+UBSan"
