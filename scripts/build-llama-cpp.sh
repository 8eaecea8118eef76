#!/usr/bin/env bash
# The peer for oal's serving and speed measurements: llama.cpp's own C++ tools —
# llama-server (continuous batching over --parallel slots), llama-bench,
# llama-batched-bench (one prefill of N tokens, then decode at depth N: the long-context
# sweep) and llama-quantize — built from source on this machine (this CPU's own
# instruction sets, like a user's build). The source is the llama.cpp that PyPI's
# llama-cpp-python 0.3.16 vendors (the same llama.cpp the tests' llama-cpp-python
# references are built from), fetched as its sdist with pip; nothing else is downloaded.
# Idempotent: an existing build is reused.
#
# AMX is never compiled in (scripts/peer-cmake-flags.sh says why and how). A new build
# is checked against the committed llama.cpp reference by scripts/check_peer.py before
# it is used (its llama-server's next-token log-probabilities and greedy tokens); a build
# that disagrees is removed and the script fails.
#
#   scripts/build-llama-cpp.sh            # -> .cache/peer/bin/{llama-server,llama-bench,llama-batched-bench,llama-quantize}
#   PEER_SIMD=avx2 PEER_DIR=.cache/peer-avx2 scripts/build-llama-cpp.sh
#                                         # -> llama-server, llama-bench and llama-batched-bench,
#                                         #    AVX2 + FMA + F16C, AVX-512 and AMX off
#                                         #    (the AVX2 side of an AVX-512 machine's comparison)
# Environment: JOBS (default nproc), PEER_DIR (default .cache/peer), PEER_SIMD (empty = this CPU)
set -euo pipefail
cd "$(dirname "$0")/.."
PEER_DIR=${PEER_DIR:-.cache/peer}
JOBS=${JOBS:-$(nproc)}
version=0.3.16
bin="$PEER_DIR/bin"
case "${PEER_SIMD:-}" in
  "") targets="llama-server llama-bench llama-batched-bench llama-quantize" ;;
  avx2) targets="llama-server llama-bench llama-batched-bench" ;;
  *) echo "build-llama-cpp: PEER_SIMD must be empty (this CPU) or avx2, got '$PEER_SIMD'" >&2; exit 2 ;;
esac
mapfile -t simd_flags < <(bash scripts/peer-cmake-flags.sh "${PEER_SIMD:-}")
if grep -qw amx_tile /proc/cpuinfo; then
  echo "build-llama-cpp: this CPU has AMX: building for its instruction sets without AMX" >&2
fi
# A build made with other flags (an older, AMX-enabled one among them) is rebuilt.
stamp="$bin/.cmake-flags"
missing=0
for t in $targets; do [ -x "$bin/$t" ] || missing=1; done
[ "$(cat "$stamp" 2>/dev/null)" = "${simd_flags[*]}" ] || missing=1
if [ "$missing" = 0 ]; then
  echo "build-llama-cpp: $bin already holds $targets" >&2
  exit 0
fi
# The source is shared by every build (PEER_SRC, default .cache/peer).
src_root=${PEER_SRC:-.cache/peer}
mkdir -p "$PEER_DIR" "$src_root"
src="$src_root/llama_cpp_python-$version/vendor/llama.cpp"
if [ ! -f "$src/CMakeLists.txt" ]; then
  [ -x .cache/venv/bin/python ] || bash scripts/python-venv.sh
  echo "build-llama-cpp: fetching the llama-cpp-python $version sdist (50 MB) from PyPI" >&2
  .cache/venv/bin/python -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-binary :all: "llama-cpp-python==$version" -d "$src_root"
  tar xzf "$src_root/llama_cpp_python-$version.tar.gz" -C "$src_root"
fi
echo "build-llama-cpp: building llama.cpp tools with $JOBS jobs (about 10 minutes on 2 cores)" >&2
cmake -S "$src" -B "$PEER_DIR/build" -DCMAKE_BUILD_TYPE=Release "${simd_flags[@]}" \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DBUILD_SHARED_LIBS=OFF > "$PEER_DIR/cmake.log"
# shellcheck disable=SC2086
cmake --build "$PEER_DIR/build" -j "$JOBS" --target $targets > "$PEER_DIR/build.log"
mkdir -p "$bin"
for t in $targets; do cp "$PEER_DIR/build/bin/$t" "$bin/"; done
model=${OAL_MODEL_CACHE:-.cache/models}/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || bash scripts/fetch-models.sh
if ! python3 scripts/check_peer.py --server "$bin/llama-server" --model "$model" >&2; then
  for t in $targets; do rm -f "$bin/$t"; done
  echo "build-llama-cpp: the build in $bin computes other logits than the reference; removed" >&2
  exit 1
fi
echo "${simd_flags[*]}" > "$stamp"
echo "build-llama-cpp: built $targets in $bin" >&2
