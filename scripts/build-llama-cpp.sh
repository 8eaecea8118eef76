#!/usr/bin/env bash
# The peer for oal's serving and speed measurements: llama.cpp's own C++ tools —
# llama-server (continuous batching over --parallel slots), llama-bench,
# llama-batched-bench (one prefill of N tokens, then decode at depth N: the long-context
# sweep) and llama-quantize — built from source on this machine (native CPU flags, like a user's
# build). The source is the llama.cpp that PyPI's llama-cpp-python 0.3.16 vendors (the
# same llama.cpp the tests' llama-cpp-python references are built from), fetched as its
# sdist with pip; nothing else is downloaded. Idempotent: an existing build is reused.
#
#   scripts/build-llama-cpp.sh            # -> .cache/peer/bin/{llama-server,llama-bench,llama-batched-bench,llama-quantize}
#   PEER_SIMD=avx2 PEER_DIR=.cache/peer-avx2 scripts/build-llama-cpp.sh
#                                         # -> llama-bench and llama-batched-bench only, AVX2 + FMA + F16C, AVX-512 off
#                                         #    (the AVX2 side of an AVX-512 machine's comparison)
# Environment: JOBS (default nproc), PEER_DIR (default .cache/peer), PEER_SIMD (empty = native)
set -euo pipefail
cd "$(dirname "$0")/.."
PEER_DIR=${PEER_DIR:-.cache/peer}
JOBS=${JOBS:-$(nproc)}
version=0.3.16
bin="$PEER_DIR/bin"
case "${PEER_SIMD:-}" in
  "") targets="llama-server llama-bench llama-batched-bench llama-quantize"; simd_flags=(-DGGML_NATIVE=ON) ;;
  avx2) targets="llama-bench llama-batched-bench"
        simd_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                    -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF) ;;
  *) echo "build-llama-cpp: PEER_SIMD must be empty (native) or avx2, got '$PEER_SIMD'" >&2; exit 2 ;;
esac
missing=0
for t in $targets; do [ -x "$bin/$t" ] || missing=1; done
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
echo "build-llama-cpp: built $targets in $bin" >&2
