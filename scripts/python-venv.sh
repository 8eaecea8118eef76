#!/usr/bin/env bash
# Creates the project's Python environment for the tests' reference implementations:
# a venv at .cache/venv (git-ignored; never the system Python) from Debian's python3,
# with pinned PyPI packages:
#   gguf, numpy       the gguf package's dequantization, the reference for io/gguf_quants
#   openai            the OpenAI Python client, a real client for `oal serve`'s tests
#   selenium          drives headless Chromium (Debian's chromium + chromium-driver,
#                     scripts/install-deps.sh --test) through `oal serve`'s chat page
#   sentencepiece     Google's SentencePiece, which scripts/spm_reference.py uses to make
#                     the SentencePiece tokenizer's committed reference data
#   --peer            also llama-cpp-python (builds llama.cpp from source for this
#                     CPU, AMX off: scripts/peer-cmake-flags.sh; several minutes on
#                     2 cores): the peer that scripts/llamacpp_reference.py runs
# Idempotent: packages already at the pinned version are not reinstalled.
# Prints nothing but errors unless something is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${OAL_VENV:-.cache/venv}"
packages=(numpy==2.2.6 gguf==0.17.1 openai==1.109.1 sentencepiece==0.2.0 selenium==4.27.1)
[ "${1:-}" = "--peer" ] && packages+=(llama-cpp-python==0.3.16)

if [ ! -x "$venv/bin/python" ]; then
  echo "python-venv: creating $venv"
  /usr/bin/python3 -m venv "$venv"
fi
missing=()
for p in "${packages[@]}"; do
  name="${p%%==*}"; want="${p##*==}"
  have="$("$venv/bin/python" -m pip show "$name" 2>/dev/null | sed -n "s/^Version: //p" || true)"
  [ "$have" = "$want" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "python-venv: installing ${missing[*]}"
  # llama-cpp-python compiles llama.cpp: the same flags as scripts/build-llama-cpp.sh.
  CMAKE_ARGS="$(bash scripts/peer-cmake-flags.sh | tr '\n' ' ')" \
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
fi
