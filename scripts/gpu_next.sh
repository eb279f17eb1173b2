#!/usr/bin/env bash
# The questions the H100 figures of 2026-12-07 left, in one device call of under 10 minutes,
# without FA4 (cuDNN is the decode peer; paged against dense is our kernel against itself):
#   tuning    the front door's GPU tests from an empty cuTile compile cache, with the tuner's
#             precompile compiling each distinct kernel once and a decode class timed over 2
#             rounds (11.6-12.1 s before, 7.1-8.2 s of it compiling); the host's CPUs printed
#   tests     the serving kernels' GPU tests (the varlen kernel's 128-row tiles, the paged
#             kernel's new key blocks and split table)
#   gputests  (STAGES=gputests) every GPU test but the timed front door's, 8 workers
#   paged     16 x 8k as a paged batch beside our dense decode, as a plain sweep now runs it
#             (pages of 64: 128-key blocks, one split a sequence; pages of 16: 64-key blocks),
#             and serving-decode-64 at pages of 16 and 64 with the new split table
#   varlen    serving-prefill-varlen at 64x64 (the preset), 64x128, 128x64 and 128x128 tiles
#   beyond    decode shapes past the presets through the plain calls (B1 k128k, B4 q4 k16k D64,
#             B64 k1k), beside cuDNN
#   varlenfa4 (STAGES=varlenfa4, with FA4 sourced) serving-prefill-varlen at its 128x128 tile beside
#             FA4's varlen, as it comes and on 2-CTA clusters at 2 CTAs an SM (the dense prefill's
#             fastest form; with and without the polynomial exp2), one group each (2026-12-07:
#             the polynomial and the latencies alone moved it under 1.7 %)
#   d96       (not in the default list: STAGES=d96) the D 96 causal prefill beside our own D 128
#             of the same shape (2026-12-07: 468.9 against 487.9 us, 0.96 of D 128's time for
#             0.75 of its FLOPs)
#   pluginloop (STAGES=pluginloop, with the Qt bundle sourced: a second call carrying .gpuqt)
#             issue #55's loop in the window: a copy of the Triton example swept beside cutile
#             and cuDNN, one line saved (BLOCK_M 64 -> 128), the seconds from the save to the
#             rerun stored, and its picture (scripts/screenshot.py --loop-with triton)
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
STAGES=${STAGES:-tuning,tests,paged,varlen,beyond}
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
{ echo "nproc $(nproc)"; python3 -c 'import os; print("affinity", len(os.sched_getaffinity(0)))'
  cat /sys/fs/cgroup/cpu.max 2>/dev/null | sed 's/^/cpu.max /'; } | tee -a "$WORK/gpu.txt"

if stage tuning && before 30; then
  echo "== $(elapsed) tuning: the front door's GPU tests, cuTile's compile cache empty"
  CUDA_TILE_CACHE_DIR=$(mktemp -d /tmp/cutile-cold.XXXX) timeout -s INT -k 10 "${TUNING_TIMEOUT:-120}" \
    python3 -m pytest -q -p no:cacheprovider -rfEs -s tests/gpu/test_front_door.py \
    > "$WORK/tuning-tests.txt" 2>&1
  echo "exit $?"; grep -E "tuning took|precompile|passed|failed" "$WORK/tuning-tests.txt" | tail -12
  pack
fi

if stage tests && before "${BEFORE_TESTS:-120}"; then
  echo "== $(elapsed) tests: the serving kernels on the GPU"
  timeout -s INT -k 10 "${TESTS_TIMEOUT:-90}" python3 -m pytest -q -p no:cacheprovider -rfEs \
    tests/gpu/test_serving_kernels.py > "$WORK/serving-tests.txt" 2>&1
  echo "exit $?"; tail -4 "$WORK/serving-tests.txt"
  pack
fi

if stage gputests && before "${BEFORE_GPUTESTS:-150}"; then
  echo "== $(elapsed) gputests: every GPU correctness test (the front door's timed ones apart)"
  timeout -s INT -k 10 "${GPUTESTS_TIMEOUT:-200}" python3 -m pytest -q -p no:cacheprovider -rfEs \
    -n "${TEST_WORKERS:-8}" tests/gpu tests/test_cutile_serving.py --deselect tests/gpu/test_front_door.py \
    -k "not in_a_group" > "$WORK/gpu-tests.txt" 2>&1
  echo "exit $?"; tail -6 "$WORK/gpu-tests.txt"
  pack
fi

uniform="--lengths $(printf '8k,%.0s' {1..15})8k --heads 32 --kv-heads 8 --head-dim 128 --dtype bfloat16 --q-len 1 --mask none --pack-gqa"
dense="--batch 16 --heads 32 --kv-heads 8 --head-dim 128 --dtype bfloat16 --q-len 1 --k-lens 8k --pack-gqa --kv-splits auto --tile-n 128"
if stage paged && before "${BEFORE_PAGED:-200}"; then
  echo "== $(elapsed) paged: 16 x 8k paged beside the dense decode, and serving-decode-64"
  OUT=$WORK/paged STAGES=sweep,check ROUNDS=3 CHECK_ROUNDS=2 PEERS=torch-cudnn \
    SWEEP_TIMEOUT=${PAGED_SWEEP_TIMEOUT:-70} SWEEP_BUDGET=${PAGED_BUDGET:-160} CHECK_TIMEOUT=${PAGED_CHECK_TIMEOUT:-70} \
    GROUPS_LIST="dense|cutile,torch-cudnn|$dense;P64|cutile,torch-cudnn|$uniform --page-size 64;P16|cutile,torch-cudnn|$uniform --page-size 16;decode64-P16|cutile,torch-cudnn|--preset serving-decode-64;decode64-P64|cutile,torch-cudnn|--preset serving-decode-64 --page-size 64" \
    CHECK_NAMES=dense,P64,P16,decode64-P16,decode64-P64 \
    bash scripts/gpu_serving.sh 2>&1 | grep -v Warning | tail -24
  pack
fi

if stage varlen && before "${BEFORE_VARLEN:-420}"; then
  echo "== $(elapsed) varlen: the prefill preset's tiles"
  v="--preset serving-prefill-varlen"
  OUT=$WORK/varlen STAGES=sweep ROUNDS=3 PEERS=torch-cudnn SWEEP_TIMEOUT=${VARLEN_SWEEP_TIMEOUT:-60} \
    SWEEP_BUDGET=${VARLEN_BUDGET:-100} GROUPS_LIST="varlen-64x64|cutile,torch-cudnn|$v;varlen-128x128|cutile,torch-cudnn|$v --tile-m 128 --tile-n 128;varlen-64x128|cutile,torch-cudnn|$v --tile-n 128;varlen-128x64|cutile,torch-cudnn|$v --tile-m 128" \
    bash scripts/gpu_serving.sh 2>&1 | grep -v Warning | tail -12
  pack
fi

if stage beyond && before "${BEFORE_BEYOND:-460}"; then
  echo "== $(elapsed) beyond: decode shapes past the presets through the plain calls"
  OUT=$WORK/beyond PEERS=cutile,torch-cudnn STAGES=${BEYOND_STAGES:-sweep} CHECK_ROUNDS=2 CHECK_TIMEOUT=${BEYOND_CHECK_TIMEOUT:-90} ROUNDS=3 SWEEP_TIMEOUT=${BEYOND_SWEEP_TIMEOUT:-40} \
    PROBLEMS="B64-k1k|--batch 64 --head-dim 128 --q-len 1 --k-lens 1k;B4-q4-k16k-D64|--batch 4 --head-dim 64 --q-len 4 --k-lens 16k;B1-k128k|--batch 1 --head-dim 128 --q-len 1 --k-lens 128k" \
    bash scripts/gpu_front_door.sh 2>&1 | grep -v Warning | tail -20
fi
if stage varlenfa4 && before "${BEFORE_VARLENFA4:-300}"; then
  echo "== $(elapsed) varlenfa4: the varlen prefill's block step beside FA4's varlen"
  v="--preset serving-prefill-varlen"
  OUT=$WORK/varlenfa4 STAGES=${VARLENFA4_STAGES:-sweep} ROUNDS=3 CHECK_ROUNDS=2 PEERS=fa4 \
    SWEEP_TIMEOUT=${VARLENFA4_SWEEP_TIMEOUT:-60} SWEEP_BUDGET=${VARLENFA4_BUDGET:-240} \
    CHECK_TIMEOUT=${VARLENFA4_CHECK_TIMEOUT:-80} CHECK_NAMES=${VARLENFA4_CHECK:-varlen-plain,varlen-cluster2} \
    GROUPS_LIST="${VARLENFA4_GROUPS:-varlen-plain|cutile,fa4|$v;varlen-cluster2|cutile,fa4|$v --cluster-ctas 2 --occupancy 2;varlen-cluster2-poly16|cutile,fa4|$v --cluster-ctas 2 --occupancy 2 --poly-exp2-cols 16}" \
    bash scripts/gpu_serving.sh 2>&1 | grep -v Warning | tail -16
  pack
fi
if stage d96 && before "${BEFORE_D96:-300}"; then
  echo "== $(elapsed) d96: D 96 against D 128, causal prefill B2 N4k, tuned"
  OUT=$WORK/d96 PEERS=cutile,torch-cudnn STAGES=sweep ROUNDS=3 SWEEP_TIMEOUT=${D96_SWEEP_TIMEOUT:-120} \
    PROBLEMS="D96|--batch 2 --head-dim 96 --seq-lens 4k --mask causal;D128|--batch 2 --head-dim 128 --seq-lens 4k --mask causal" \
    bash scripts/gpu_front_door.sh 2>&1 | grep -v Warning | tail -16
fi
if stage pluginloop && before "${BEFORE_PLUGINLOOP:-300}"; then
  echo "== $(elapsed) pluginloop: the Triton example's edit-and-rerun loop in the window"
  QT_QPA_PLATFORM=offscreen timeout -s INT -k 10 "${PLUGINLOOP_TIMEOUT:-400}" \
    python3 scripts/screenshot.py --loop "$WORK/loop-triton.png" --loop-with triton \
    > "$WORK/loop-triton.txt" 2>&1
  echo "exit $?"; grep -E "^loop:|saved" "$WORK/loop-triton.txt"
  pack
fi
echo "== $(elapsed) done"
