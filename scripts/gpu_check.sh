#!/usr/bin/env bash
# One device call: the FMHA benchmark (a group sweep per mask into $OUT/bench.db), then the
# kernel's GPU tests, logs under $OUT.
#   source .gpuhost/activate.sh .gpuhost && bash scripts/gpu_check.sh [tests|bench|all] [bench flags]
#   ... gpu_check.sh profile [bench/profile_kernels.py flags]: Nsight Compute report of one launch
#   of the cuTile kernel and of cuDNN per problem ($OUT/prof.ncu-rep, its details as text).
# e.g. a smoke run:  bash scripts/gpu_check.sh all --ns 1k,4k --rounds 2
# BENCH_TIMEOUT / TEST_TIMEOUT (seconds) cap each part so a hung kernel cannot eat the call;
# the benchmark commits every point as it is measured, pytest prints what it finished.
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
  timeout -s INT -k 10 "${BENCH_TIMEOUT:-1800}" $py bench/bench_fmha.py --db "$OUT/bench.db" --markdown "$OUT/bench.md" "$@" 2>&1 | tee "$OUT/bench.txt"
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
if [[ $mode == profile ]]; then
  echo "== profile"
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
  # --clock-control none: the clocks stay as the machine has them (docs/performance.md).
  timeout -s INT -k 10 "${PROFILE_TIMEOUT:-480}" "$ncu_bin" --clock-control none --nvtx \
      --nvtx-include "profile/" --set full -f -o "$OUT/prof" $py bench/profile_kernels.py "$@" \
      2>&1 | grep -v "^==PROF== Profiling" | tee "$OUT/profile.txt"
  rc=${PIPESTATUS[0]}
  "$ncu_bin" --import "$OUT/prof.ncu-rep" --page details > "$OUT/profile-details.txt" 2>&1
  "$ncu_bin" --import "$OUT/prof.ncu-rep" --page raw --csv > "$OUT/profile-raw.csv" 2>&1
  echo "profile exit code $rc"
fi
exit "$rc"
