#!/usr/bin/env bash
# The peer for oal's serving and speed measurements: llama.cpp's own C++ tools —
# llama-server (continuous batching over --parallel slots), llama-bench and
# llama-quantize — built from source on this machine (native CPU flags, like a user's
# build). The source is the llama.cpp that PyPI's llama-cpp-python 0.3.16 vendors (the
# same llama.cpp the tests' llama-cpp-python references are built from), fetched as its
# sdist with pip; nothing else is downloaded. Idempotent: an existing build is reused.
#
#   scripts/build-llama-cpp.sh            # -> .cache/peer/bin/{llama-server,llama-bench,llama-quantize}
# Environment: JOBS (default nproc), PEER_DIR (default .cache/peer)
set -euo pipefail
cd "$(dirname "$0")/.."
PEER_DIR=${PEER_DIR:-.cache/peer}
JOBS=${JOBS:-$(nproc)}
version=0.3.16
bin="$PEER_DIR/bin"
if [ -x "$bin/llama-server" ] && [ -x "$bin/llama-bench" ] && [ -x "$bin/llama-quantize" ]; then
  echo "build-llama-cpp: $bin already holds llama-server, llama-bench, llama-quantize" >&2
  exit 0
fi
mkdir -p "$PEER_DIR"
src="$PEER_DIR/llama_cpp_python-$version/vendor/llama.cpp"
if [ ! -f "$src/CMakeLists.txt" ]; then
  [ -x .cache/venv/bin/python ] || bash scripts/python-venv.sh
  echo "build-llama-cpp: fetching the llama-cpp-python $version sdist (50 MB) from PyPI" >&2
  .cache/venv/bin/python -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-binary :all: "llama-cpp-python==$version" -d "$PEER_DIR"
  tar xzf "$PEER_DIR/llama_cpp_python-$version.tar.gz" -C "$PEER_DIR"
fi
echo "build-llama-cpp: building llama.cpp tools with $JOBS jobs (about 10 minutes on 2 cores)" >&2
cmake -S "$src" -B "$PEER_DIR/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DBUILD_SHARED_LIBS=OFF > "$PEER_DIR/cmake.log"
cmake --build "$PEER_DIR/build" -j "$JOBS" --target llama-server llama-bench llama-quantize > "$PEER_DIR/build.log"
mkdir -p "$bin"
for t in llama-server llama-bench llama-quantize; do cp "$PEER_DIR/build/bin/$t" "$bin/"; done
echo "build-llama-cpp: $bin/llama-server $("$bin/llama-server" --version 2>&1 | head -1)" >&2
