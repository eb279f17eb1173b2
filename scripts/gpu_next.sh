#!/usr/bin/env bash
# The questions the H100 figures of 2026-12-07 left, in one device call of under 10 minutes,
# without FA4 (cuDNN is the decode peer; paged against dense is our kernel against itself):
#   tuning    the front door's GPU tests from an empty cuTile compile cache: does the tuner's
#             parallel precompile (kernels/cutile/precompile.py) bring a cold decode class
#             under the 10 s the test asks (11.4-13.5 s before it)?
#   paged     16 x 8k as a paged batch at pages of 64 beside our dense decode: the auto split
#             table's 4 splits a sequence and 64-key blocks (0.912x dense), one split, and one
#             split over 128-key blocks (two pages joined)
#   varlen    serving-prefill-varlen at 64x128 tiles beside the preset's 64x64 (0.729x FA4)
#   beyond    decode shapes past the presets through the plain calls (B1 k128k, B4 q4 k16k D64,
#             B64 k1k), beside cuDNN
#   d96       (not in the default list: STAGES=d96) the D 96 causal prefill (0.842x FA4) beside
#             our own D 128 of the same shape: D 96 runs as column chunks of 64 and 32, whose key
#             block compiles to 462 instructions a warp against D 128's 443 (`resources`), so
#             a D 96 time near D 128's, not 0.75 of it, points at the chunking
#   source .gpuhost/activate.sh .gpuhost && FMHA_WORKBENCH_COMMIT=<hash> bash scripts/gpu_next.sh
# Each stage starts only while the call has time for it (BEFORE_*), so a slow one cuts the
# rest short with a line saying so rather than the call's limit cutting everything off.
# Everything lands in $OUT/next.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/gpu-next.XXXX)
export PYTHONUNBUFFERED=1 FMHA_WORKBENCH_COMMIT=${FMHA_WORKBENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
STAGES=${STAGES:-tuning,paged,varlen,beyond}
begun=$(date +%s)
elapsed() { echo "[$(( $(date +%s) - begun )) s]"; }
pack() { tar czf "$OUT/next.tar.gz" -C "$WORK" . ; }
trap pack EXIT
stage() { [[ ",$STAGES," == *",$1,"* ]]; }
before() {
  (( $(date +%s) - begun < $1 )) && return 0
  echo "skipped: $(elapsed) is past this stage's start limit of $1 s"; return 1
}
nvidia-smi -L | tee "$WORK/gpu.txt"

if stage tuning && before 30; then
  echo "== $(elapsed) tuning: the front door's GPU tests, cuTile's compile cache empty"
  CUDA_TILE_CACHE_DIR=$(mktemp -d /tmp/cutile-cold.XXXX) timeout -s INT -k 10 "${TUNING_TIMEOUT:-120}" \
    python3 -m pytest -q -p no:cacheprovider -rfEs -s tests/gpu/test_front_door.py \
    > "$WORK/tuning-tests.txt" 2>&1
  echo "exit $?"; grep -E "tuning took|precompile|passed|failed" "$WORK/tuning-tests.txt" | tail -12
  pack
fi

uniform="--lengths $(printf '8k,%.0s' {1..15})8k --heads 32 --kv-heads 8 --head-dim 128 --dtype bfloat16 --q-len 1 --mask none --pack-gqa"
dense="--batch 16 --heads 32 --kv-heads 8 --head-dim 128 --dtype bfloat16 --q-len 1 --k-lens 8k --pack-gqa --kv-splits auto --tile-n 128"
if stage paged && before "${BEFORE_PAGED:-150}"; then
  echo "== $(elapsed) paged: 16 x 8k at pages of 64 beside the dense decode"
  OUT=$WORK/paged STAGES=sweep,check ROUNDS=3 CHECK_ROUNDS=2 PEERS=torch-cudnn \
    SWEEP_TIMEOUT=${PAGED_SWEEP_TIMEOUT:-70} SWEEP_BUDGET=${PAGED_BUDGET:-200} CHECK_TIMEOUT=${PAGED_CHECK_TIMEOUT:-60} \
    GROUPS_LIST="dense|cutile,torch-cudnn|$dense;P64-auto-t64|cutile,torch-cudnn|$uniform --page-size 64 --kv-splits auto --tile-n 64;P64-1split-t64|cutile,torch-cudnn|$uniform --page-size 64 --kv-splits 1 --tile-n 64;P64-1split-t128|cutile,torch-cudnn|$uniform --page-size 64 --kv-splits 1 --tile-n 128" \
    CHECK_NAMES=dense,P64-auto-t64,P64-1split-t64,P64-1split-t128 \
    bash scripts/gpu_serving.sh 2>&1 | grep -v Warning | tail -24
  pack
fi

if stage varlen && before "${BEFORE_VARLEN:-390}"; then
  echo "== $(elapsed) varlen: the prefill preset at 64x128 tiles"
  OUT=$WORK/varlen STAGES=sweep ROUNDS=3 PEERS=torch-cudnn SWEEP_TIMEOUT=${VARLEN_SWEEP_TIMEOUT:-80} \
    SWEEP_BUDGET=60 GROUPS_LIST="prefill-varlen-t128|cutile,torch-cudnn|--preset serving-prefill-varlen --tile-n 128" \
    bash scripts/gpu_serving.sh 2>&1 | grep -v Warning | tail -10
  pack
fi

if stage beyond && before "${BEFORE_BEYOND:-470}"; then
  echo "== $(elapsed) beyond: decode shapes past the presets through the plain calls"
  OUT=$WORK/beyond PEERS=cutile,torch-cudnn STAGES=sweep ROUNDS=3 SWEEP_TIMEOUT=${BEYOND_SWEEP_TIMEOUT:-40} \
    PROBLEMS="B1-k128k|--batch 1 --head-dim 128 --q-len 1 --k-lens 128k;B4-q4-k16k-D64|--batch 4 --head-dim 64 --q-len 4 --k-lens 16k;B64-k1k|--batch 64 --head-dim 128 --q-len 1 --k-lens 1k" \
    bash scripts/gpu_front_door.sh 2>&1 | grep -v Warning | tail -20
fi
if stage d96 && before "${BEFORE_D96:-300}"; then
  echo "== $(elapsed) d96: D 96 against D 128, causal prefill B2 N4k, tuned"
  OUT=$WORK/d96 PEERS=cutile,torch-cudnn STAGES=sweep ROUNDS=3 SWEEP_TIMEOUT=${D96_SWEEP_TIMEOUT:-120} \
    PROBLEMS="D96|--batch 2 --head-dim 96 --seq-lens 4k --mask causal;D128|--batch 2 --head-dim 128 --seq-lens 4k --mask causal" \
    bash scripts/gpu_front_door.sh 2>&1 | grep -v Warning | tail -16
fi
echo "== $(elapsed) done"
