#!/usr/bin/env bash
# Installs the Debian 12 packages oal builds against. Idempotent: packages already
# present are skipped, and apt is not touched at all when nothing is missing.
#   scripts/install-deps.sh          what the `oal` binary and the main job (make demo) need
#   scripts/install-deps.sh --test   also what the test suite needs (make test): GoogleTest,
#                                    the Python package's torch and pytest, clang-14 for the
#                                    sanitizer and fuzz build
# libopenblas-dev is required: without it LibTorch links the reference BLAS and fp32
# GEMM runs ~15x slower (see docs/design.md). libhwy-dev (Google Highway) is the CPU
# kernels' portable SIMD layer. libgloo-dev provides the headers of LibTorch's Gloo
# process group (multi-process calibration; the code itself is in libtorch).
# python3-venv makes the project's venv (.cache/venv, scripts/python-venv.sh) for the PyPI
# packages: the model wheel's download, the gguf package the tests compare with.
# libcpp-httplib-dev (cpp-httplib, the HTTP library llama-server uses too) is `oal serve`'s
# HTTP layer.
# python3-torch (the same LibTorch as libtorch-dev) and python3-pytest build and test the
# Python package (python/); its ops need neither pybind11 nor the Python headers.
# clang-14, libclang-rt-14-dev (libFuzzer and the sanitizer runtimes) and llvm-14
# (llvm-symbolizer, for readable sanitizer reports) build the fuzz targets and the
# sanitizer test run (`make fuzz`, `make test-asan`; docs/reliability.md).
# chromium and chromium-driver run `oal serve`'s chat page headless in its test
# (tests/serve/chat_page_test.py, through the venv's selenium).
set -euo pipefail

packages=(build-essential cmake libtorch-dev libopenblas-dev nlohmann-json3-dev
          libcli11-dev libfmt-dev libhwy-dev libgloo-dev libcpp-httplib-dev python3-venv)
case "${1:-}" in
  "") ;;
  --test) packages+=(libgtest-dev python3-torch python3-pytest clang-14 libclang-rt-14-dev llvm-14
                     chromium chromium-driver) ;;
  *) echo "install-deps: unknown option '$1' (expected nothing or --test)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
