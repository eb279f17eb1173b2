#!/usr/bin/env bash
# One device call: the FMHA benchmark, then the GPU tests, logs under $OUT.
#   source .gpuhost/activate.sh .gpuhost && bash scripts/gpu_check.sh [tests|bench|all] [bench flags]
# e.g. a smoke run:  bash scripts/gpu_check.sh all --ns 1024,4096 --rounds 1
# BENCH_TIMEOUT / TEST_TIMEOUT (seconds) cap each part so a hung kernel cannot eat the call;
# the benchmark writes its JSON/markdown after every problem, pytest prints what it finished.
# The GPU tests run under pytest-xdist: compiles serialise inside one process, so parallel
# processes are what makes the ~70 kernel variants compile in reasonable time.
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
  tileiras --version | tail -2
} 2>&1 | tee "$OUT/machine.txt"

rc=0
if [[ $mode == bench || $mode == all ]]; then
  echo "== benchmark"
  timeout -s INT -k 10 "${BENCH_TIMEOUT:-1800}" $py bench/bench_fmha.py --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.txt"
  rc=${PIPESTATUS[0]}
  echo "bench exit code $rc"
fi
if [[ $mode == tests || $mode == all ]]; then
  echo "== GPU tests"
  workers=$(( $(nproc) / 2 )); (( workers > 8 )) && workers=8
  # thread-method timeout: a test stuck in a hung kernel gets its worker killed (and xdist
  # replaces it) instead of blocking the run; -v names every test as it finishes.
  timeout -s INT -k 10 "${TEST_TIMEOUT:-1200}" $py -m pytest -m gpu tests/gpu -v -p no:cacheprovider \
      -p no:benchmark -n "$workers" --timeout="${PER_TEST_TIMEOUT:-90}" --timeout-method=thread \
      -rfEs --durations=15 2>&1 | grep -v "^\s*$" | tee "$OUT/tests.txt"
  trc=${PIPESTATUS[0]}
  echo "pytest exit code $trc"
  (( rc == 0 )) && rc=$trc
fi
exit "$rc"
