#!/usr/bin/env bash
# One device call: GPU tests, then the FMHA benchmark, logs under $OUT.
#   source .gpuhost/activate.sh .gpuhost && bash scripts/gpu_check.sh [tests|bench|all] [bench flags]
# e.g. a smoke run:  bash scripts/gpu_check.sh all --ns 1024,4096 --rounds 1
# Workers: the GPU tests run under pytest-xdist (compiles serialise inside one process, so
# parallel processes are what makes ~100 kernel variants compile in about a minute).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
shift || true
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
py=python3

{
  echo "== machine"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  $py -c 'import torch, cuda.tile as ct; print("torch", torch.__version__, "cuda.tile", ct.__version__)'
  tileiras --version | tail -1
} 2>&1 | tee "$OUT/machine.txt"

rc=0
if [[ $mode == tests || $mode == all ]]; then
  echo "== GPU tests"
  workers=$(( $(nproc) / 2 )); (( workers > 8 )) && workers=8
  $py -m pytest -m gpu tests/gpu -q -p no:cacheprovider -n "$workers" --maxfail=25 \
      --timeout=420 -rfEs 2>&1 | tee "$OUT/tests.txt"
  rc=${PIPESTATUS[0]}
  echo "pytest exit code $rc"
fi
if [[ $mode == bench || $mode == all ]]; then
  echo "== benchmark"
  $py bench/bench_fmha.py --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.txt"
  brc=${PIPESTATUS[0]}
  echo "bench exit code $brc"
  (( rc == 0 )) && rc=$brc
fi
exit "$rc"
