#!/usr/bin/env bash
# One device call for issue #52 on the GPU: the GPU tests of the head dims (padded and chunked),
# the value head dim and the decode front door, then the decode front door's plain sweeps beside
# cuDNN (and FA4 where installed) with the independent check (scripts/gpu_front_door.sh). The
# serving kernels and the example plugins have their own calls: scripts/gpu_serving.sh and
# scripts/gpu_plugins.sh. Logs under $OUT.
#   source .gpuhost/activate.sh .gpuhost && bash scripts/gpu_pending.sh
# TESTS_TIMEOUT, SWEEP_TIMEOUT and CHECK_TIMEOUT bound each stage (a device call has 10 minutes).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FMHA_WORKBENCH_COMMIT=${FMHA_WORKBENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
nvidia-smi -L
workers=""
python3 -c "import xdist" 2>/dev/null && workers="-n ${TEST_WORKERS:-6}"
# shellcheck disable=SC2086
timeout "${TESTS_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider \
  tests/gpu/test_head_dims.py tests/gpu/test_head_dim_v.py tests/gpu/test_head_dim_chunks.py \
  tests/gpu/test_front_door.py $workers > "$OUT/gpu-tests.txt" 2>&1
echo "GPU tests: exit $?"; tail -25 "$OUT/gpu-tests.txt"
PEERS=${PEERS:-cutile,torch-cudnn} SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-60} CHECK_TIMEOUT=${CHECK_TIMEOUT:-70} \
STAGES=sweep,check \
PROBLEMS=${PROBLEMS:-"B1-k32k|--batch 1 --head-dim 128 --q-len 1 --k-lens 32k;B8-k8k|--batch 8 --head-dim 128 --q-len 1 --k-lens 8k;B32-k4k|--batch 32 --head-dim 128 --q-len 1 --k-lens 4k"} \
  bash scripts/gpu_front_door.sh 2>&1 | tail -40
