#!/usr/bin/env bash
# Issues #52, #54 and #55 on the GPU in one device call of under 10 minutes, for a session whose
# device time allows one call: every GPU correctness test written for them, in parallel (nothing
# they assert is a timing), then the timed parts one at a time: the front door's tests and plain
# decode sweeps beside cuDNN and FA4 (scripts/gpu_front_door.sh), the serving goal groups
# (scripts/gpu_serving.sh), the example plugins beside cutile (scripts/gpu_plugins.sh) and the
# triton check. Each stage has its own time limit, so a slow one cuts itself short, not the rest.
# Everything lands in $OUT/all.tar.gz (a call brings back few files).
#   source .gpuhost/activate.sh .gpuhost && [export PYTHONPATH=/tmp/fa4site:…; ] bash scripts/gpu_all.sh
# The three scripts run alone give each issue more rounds and more shapes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
FINAL=$OUT
WORK=$(mktemp -d /tmp/gpu-all.XXXX)
export PYTHONUNBUFFERED=1 FMHA_WORKBENCH_COMMIT=${FMHA_WORKBENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
begun=$(date +%s)
elapsed() { echo "[$(( $(date +%s) - begun )) s]"; }
pack() { tar czf "$FINAL/all.tar.gz" -C "$WORK" . ; }
trap pack EXIT
# before SECONDS: true while the call has run less than that (a later stage is skipped, saying so,
# rather than cut off by the call's limit with nothing packed).
before() {
  (( $(date +%s) - begun < $1 )) && return 0
  echo "skipped: $(elapsed) is past this stage's start limit of $1 s"; return 1
}
PEERS=cutile,torch-cudnn
python3 -c "import flash_attn.cute" 2>/dev/null && PEERS=$PEERS,fa4
nvidia-smi -L | tee "$WORK/gpu.txt"
echo "peers: $PEERS"

echo "== $(elapsed) correctness: the GPU tests of #52, #54, #55 (parallel)"
timeout -s INT -k 10 "${TESTS_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider -rfEs \
  -n "${TEST_WORKERS:-8}" \
  tests/gpu/test_head_dims.py tests/gpu/test_head_dim_v.py tests/gpu/test_head_dim_chunks.py \
  tests/gpu/test_serving_kernels.py tests/gpu/test_serving_backends.py tests/test_cutile_serving.py \
  tests/gpu/test_example_plugins_on_gpu.py -k "not in_a_group" > "$WORK/tests.txt" 2>&1
echo "exit $?"; tail -20 "$WORK/tests.txt"; pack

echo "== $(elapsed) timed tests, one at a time (the front door, the plugins beside cutile)"
before 200 && timeout -s INT -k 10 "${TIMED_TESTS_TIMEOUT:-60}" python3 -m pytest -q -p no:cacheprovider -rfEs -s \
  tests/gpu/test_front_door.py tests/gpu/test_example_plugins_on_gpu.py -k "front_door or in_a_group or decode" \
  > "$WORK/timed-tests.txt" 2>&1
echo "exit $?"; tail -12 "$WORK/timed-tests.txt"; pack

echo "== $(elapsed) the front door's plain decode sweeps and D96 prefill"
before 300 && OUT=$WORK/front-door PEERS=$PEERS \
  SWEEP_TIMEOUT=${FRONT_SWEEP_TIMEOUT:-40} CHECK_TIMEOUT=${FRONT_CHECK_TIMEOUT:-45} ROUNDS=4 CHECK_ROUNDS=3 \
  STAGES=sweep,check \
  PROBLEMS=${FRONT_PROBLEMS:-"B1-k32k|--batch 1 --head-dim 128 --q-len 1 --k-lens 32k;B8-k8k|--batch 8 --head-dim 128 --q-len 1 --k-lens 8k;B32-k4k|--batch 32 --head-dim 128 --q-len 1 --k-lens 4k;D96-prefill|--batch 2 --head-dim 96 --seq-lens 4k --mask causal"} \
  bash scripts/gpu_front_door.sh 2>&1 | tail -30
pack

echo "== $(elapsed) serving: paged decode P16/P64, varlen prefill, paged vs dense on 16 x 8k"
decode="--preset serving-decode-64"
uniform="--lengths $(printf '8k,%.0s' {1..15})8k --heads 32 --kv-heads 8 --head-dim 128 --dtype bfloat16 --q-len 1 --mask none --pack-gqa --kv-splits auto"
serving_groups="decode64-P16|$PEERS|$decode --page-size 16 --tile-n 64"
serving_groups+=";decode64-P64|$PEERS|$decode --page-size 64 --tile-n 64"
serving_groups+=";prefill-varlen|$PEERS,torch-flash|--preset serving-prefill-varlen"
serving_groups+=";uniform16x8k-dense|$PEERS|--batch 16 --heads 32 --kv-heads 8 --head-dim 128 --dtype bfloat16 --q-len 1 --k-lens 8k --pack-gqa --kv-splits auto --tile-n 128"
serving_groups+=";uniform16x8k-P64|$PEERS|$uniform --page-size 64 --tile-n 64"
before 430 && OUT=$WORK/serving STAGES=sweep,check GROUPS_LIST=$serving_groups \
  SWEEP_TIMEOUT=${SERVING_SWEEP_TIMEOUT:-40} SWEEP_BUDGET=${SERVING_BUDGET:-90} \
  CHECK_TIMEOUT=${SERVING_CHECK_TIMEOUT:-35} ROUNDS=3 CHECK_ROUNDS=2 \
  CHECK_NAMES=decode64-P16,decode64-P64,prefill-varlen,uniform16x8k-dense,uniform16x8k-P64 \
  bash scripts/gpu_serving.sh 2>&1 | tail -30
pack

echo "== $(elapsed) plugins: the GPU examples beside cutile and cuDNN"
before 530 && OUT=$WORK/plugins STAGES=sweep SWEEP_TIMEOUT=${PLUGIN_SWEEP_TIMEOUT:-40} ROUNDS=3 \
  PROBLEMS="D64-causal|--batch 4 --heads 16 --head-dim 64 --seq-lens 1k,4k --mask causal" \
  bash scripts/gpu_plugins.sh 2>&1 | tail -20
echo "== $(elapsed) done"
