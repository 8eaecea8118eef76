#!/usr/bin/env bash
# Prints the CMake flags that build llama.cpp (ggml) right on this CPU, one per line:
# scripts/build-llama-cpp.sh uses them for llama.cpp's tools and scripts/python-venv.sh
# --peer for llama-cpp-python, so both peers are built alike.
#
#   scripts/peer-cmake-flags.sh          # this CPU's instruction sets
#   scripts/peer-cmake-flags.sh avx2     # AVX2 + FMA + F16C only (the AVX2 side of an
#                                        # AVX-512 machine's comparison)
#
# AMX is never compiled in. On CPUs with AMX (Sapphire / Emerald Rapids Xeons) llama.cpp
# 0.3.16 built with -march=native gives wrong logits (PPL 378 on two WikiText-2 blocks
# where the committed reference says 27.1), so there GGML_NATIVE is off and the CPU's
# other instruction sets (AVX-512 and its VNNI / VBMI / BF16 included) are named one by
# one, with every GGML_AMX_* off. Elsewhere GGML_NATIVE=ON (the user's usual build).
set -euo pipefail
has() { grep -qw "$1" /proc/cpuinfo; }
onoff() { if has "$1"; then echo ON; else echo OFF; fi; }
no_amx=(-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
case "${1:-}" in
  "")
    if has amx_tile; then
      flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2="$(onoff avx2)" -DGGML_FMA="$(onoff fma)"
             -DGGML_F16C="$(onoff f16c)" -DGGML_BMI2="$(onoff bmi2)" -DGGML_AVX_VNNI="$(onoff avx_vnni)"
             -DGGML_AVX512="$(onoff avx512f)" -DGGML_AVX512_VBMI="$(onoff avx512vbmi)"
             -DGGML_AVX512_VNNI="$(onoff avx512_vnni)" -DGGML_AVX512_BF16="$(onoff avx512_bf16)"
             "${no_amx[@]}")
    else
      flags=(-DGGML_NATIVE=ON)
    fi ;;
  avx2)
    flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
           -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF "${no_amx[@]}") ;;
  *) echo "peer-cmake-flags: the target must be empty (this CPU) or avx2, got '$1'" >&2; exit 2 ;;
esac
printf '%s\n' "${flags[@]}"
