#!/usr/bin/env bash
# The decode and "explain" runs on the H200 through the workbench's own CLI, one stage list per
# device call, logs and the database under $OUT:
#   source .gpuhost/activate.sh .gpuhost && STAGES=probe,decode-tests bash scripts/gpu_session.sh
# Stages (in this order when listed together):
#   probe         the GPU, ncu, the backends
#   decode-tests  tests/gpu/test_decode.py (the split and combine against the reference)
#   tests         every GPU test (tests/gpu, tests/gpu_workbench)
#   machine       `machine --measure` (dense matmul and streaming-read ceilings)
#   bandwidth     `bandwidth`, then `bandwidth --sizes BW_SIZES`: the read at the decode calls'
#                 own K+V bytes (B=1 k_len 4k-128k and B=8 8k at GQA 32/8, D 128, bf16)
#   decode        one group per decode problem with the peers (PEERS), medians and noise stored
#                 (DECODE_PROBLEMS replaces the list; SEED_DB adds the groups to a database)
#   explore       bench/decode_bench.py: our variants (EXPLORE_VARIANTS) beside SDPA cuDNN and flash
#                 on its problems (EXPLORE_ONLY), at EXPLORE_DIMS head dims (e.g. "128 64")
#   check         bench/independent_check.py: the decode groups' launches timed by triton,
#                 cold L2 where the KV cache fits in it
#   ladder        the default ladder (this GPU's: Hopper) at LADDER_SEQ, causal
#   profile       `profile` (Nsight Compute) on the first decode group's cuTile and cuDNN points
#   report        the decode groups' generated table
# The database lives in $STATE (/tmp) across calls while the machine is warm; every call copies
# it to $OUT. FMHA_WORKBENCH_COMMIT=<commit> (this checkout's, written out) in front: the
# device's .git is stale. The cuTile bundle and the tree together pass a call's 64 MiB, so the
# compiler tarball goes in two parts (`split -b 30000000 .gpuhost/cu13.tar.xz
# .gpuhost/cu13.part.`), chained while the machine is warm:
#   carry [".gpuhost/cu13.part.aa"]                                   command: true
#   carry [".gpuhost/cu13.part.ab", ".gpuhost/wheels", ".gpuhost/activate.sh"]
#     command: mkdir -p /tmp/cu13 && cat .gpuhost/cu13.part.* | tar xJ -C /tmp/cu13
#   then FA4's halves (shared/gpu-host/pack-fa4.sh) and the run.
# At most 8 files come back from a call's $OUT and several stages each write their own: for a
# long stage list run with OUT=/tmp/o and end the command with `tar czf "$OUT/out.tgz" -C /tmp/o .`.
# Give a later call that seeds a database (SEED_DB) a STATE of its own if an earlier call in the
# same warm machine ran other stages.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
STATE=${STATE:-/tmp/fmha-session}
STAGES=${STAGES:-probe}
mkdir -p "$OUT" "$STATE"
export PYTHONUNBUFFERED=1 FMHA_WORKBENCH_COMMIT=${FMHA_WORKBENCH_COMMIT:-unknown}
export FMHA_WORKBENCH_MACHINE=${FMHA_WORKBENCH_MACHINE:-$STATE/machine.json}
export FMHA_WORKBENCH_ENGINE_TIMEOUT=${FMHA_WORKBENCH_ENGINE_TIMEOUT:-300}
# The tuner's picks of the last full tuning run on this GPU (it retunes only where stale).
[[ -f $STATE/h200-autotune.json ]] || cp bench/results/h200-autotune.json "$STATE/h200-autotune.json"
export FMHA_WORKBENCH_CACHE=$STATE/h200-autotune.json
DB=$STATE/h200.db
# SEED_DB: a committed database the new groups are added to (bench/results/h200-decode.db).
[[ -n ${SEED_DB:-} && ! -f $DB ]] && cp "$SEED_DB" "$DB"
PEERS=${PEERS:-cutile,torch-cudnn,torch-flash}
ROUNDS=${ROUNDS:-8}
LADDER_SEQ=${LADDER_SEQ:-2k,8k}
# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
find_ncu
GROUPS_FILE=$STATE/decode-groups.json
wb() { python3 -m workbench "$@" --db "$DB"; }
groups() { group_ids "$GROUPS_FILE"; }

if stage probe; then
  echo "== probe"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  command -v ncu && ncu --version | tail -1
  python3 -c 'import torch, cuda.tile as ct; print("torch", torch.__version__, "cuda.tile", ct.__version__)'
  python3 -m workbench backends
fi 2>&1 | tee -a "$OUT/session.txt"

if stage decode-tests; then
  echo "== decode GPU tests"
  timeout -s INT -k 10 "${TEST_TIMEOUT:-400}" python3 -m pytest -m gpu tests/gpu/test_decode.py \
    -p no:cacheprovider -p no:benchmark -q -rfEs --timeout=120 --timeout-method=thread 2>&1 \
    | grep -v "^\s*$" | tail -40
fi 2>&1 | tee -a "$OUT/session.txt"

if stage tests; then
  echo "== GPU tests"
  gpu_tests
fi 2>&1 | tee -a "$OUT/tests.txt"

if stage machine; then
  echo "== machine ceilings"
  wb machine --measure  # keeps its read figure as the GPU's read bandwidth too
fi 2>&1 | tee -a "$OUT/session.txt"

if stage bandwidth; then
  echo "== streaming read by size"
  python3 -m workbench bandwidth
  python3 -m workbench bandwidth --sizes "${BW_SIZES:-16.8M,33.6M,67.1M,134.2M,268.4M,536.9M,2Gi}" \
    --json > "$OUT/bandwidth-sizes.json"
  python3 -m workbench bandwidth --show
fi 2>&1 | tee -a "$OUT/session.txt"

if stage decode; then
  echo "== decode groups"
  # name|flags: the issue's problems, the presets at B=1 and B=8.
  problems=(
    "8b-B1|--preset llama3-8b-decode --batch 1 --k-lens 4k-128k"
    "8b-B8|--preset llama3-8b-decode --batch 8 --k-lens 4k-32k"
    "8b-spec-B8|--preset llama3-8b-speculative --batch 8 --k-lens 4k-32k"
    "70b-B1|--preset llama3-70b-decode --batch 1 --k-lens 4k-128k"
  )
  # DECODE_PROBLEMS ("name|flags;name|flags"): these instead (D = 64, fp16, …).
  if [[ -n ${DECODE_PROBLEMS:-} ]]; then IFS=';' read -r -a problems <<< "$DECODE_PROBLEMS"; fi
  echo "{}" > "$GROUPS_FILE"
  for entry in "${problems[@]}"; do
    name=${entry%%|*}; flags=${entry#*|}
    # shellcheck disable=SC2086
    # No knob flags: a preset brings the decode kernel's (packed heads, auto split, 32 KB key
    # blocks at its head dim), as a user running it gets; a problem's flags may add their own.
    timeout "${DECODE_TIMEOUT:-240}" python3 -m workbench sweep --db "$DB" --backends "$PEERS" \
      $flags --rounds "$ROUNDS" --flush-l2 \
      --label "decode $name" --json > "$STATE/decode-$name.json"
    echo "$name exit $?"
    remember "$name" "$STATE/decode-$name.json" "$GROUPS_FILE"
  done
fi 2>&1 | tee -a "$OUT/session.txt"

if stage explore; then
  echo "== decode variants (bench/decode_bench.py)"
  for dim in ${EXPLORE_DIMS:-128}; do
    # shellcheck disable=SC2086
    timeout "${EXPLORE_TIMEOUT:-300}" python3 bench/decode_bench.py --rounds "${ROUNDS}" \
      --head-dim "$dim" --json "$OUT/decode-explore-d$dim.json" \
      ${EXPLORE_ONLY:+--only $EXPLORE_ONLY} ${EXPLORE_VARIANTS:+--variants $EXPLORE_VARIANTS}
    echo "explore D$dim exit $?"
  done
fi 2>&1 | tee -a "$OUT/session.txt"

if stage check; then
  echo "== the decode groups' launches timed by triton"
  timeout "${CHECK_TIMEOUT:-300}" python3 bench/independent_check.py --db "$DB" --groups "${CHECK_GROUPS:-$(groups)}" \
    --rounds "${CHECK_ROUNDS:-6}" --json "$OUT/decode-independent.json" \
    --markdown "$OUT/decode-independent.md" 2>&1 | tail -30
fi 2>&1 | tee -a "$OUT/session.txt"

if stage ladder; then
  echo "== the default ladder"
  timeout "${LADDER_TIMEOUT:-400}" python3 -m workbench ladder --db "$DB" --backend cutile \
    --seq-lens "$LADDER_SEQ" --label "hopper ladder" 2>&1 | tail -30
fi 2>&1 | tee -a "$OUT/session.txt"

if stage profile; then
  echo "== Nsight Compute on one point"
  first=$(groups | cut -d, -f1)
  python3 - "$DB" "$first" > "$STATE/profile-targets.txt" <<'EOF'
import sys
from workbench.store import Store
with Store(sys.argv[1]) as store:
    for run in store.group_runs(int(sys.argv[2])):
        if run.backend in ("cutile", "torch-cudnn"):
            print(run.id, 32768)
EOF
  while read -r run n; do
    timeout "${PROFILE_TIMEOUT:-200}" python3 -m workbench profile "$run" --seq-len "$n" --db "$DB"
    echo "profile $run exit $?"
  done < "$STATE/profile-targets.txt"
fi 2>&1 | tee -a "$OUT/session.txt"

if stage report; then
  echo "== report"
  report_groups "$DB" "$GROUPS_FILE"
fi 2>&1 | tee -a "$OUT/session.txt"

save_db "$DB" "$OUT/h200.db"
[[ -f $STATE/machine.json ]] && cp "$STATE/machine.json" "$OUT/"
exit 0
