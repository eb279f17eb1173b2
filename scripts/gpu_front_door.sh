#!/usr/bin/env bash
# Issue #52 on the GPU: the kernel's front door on decode shapes, through the plain calls (no
# preset, no knob flags: `sweep --autotune` with --q-len/--k-lens, as a user runs it), beside
# cuDNN and FA4 in one process, then the same launches timed by triton (independent check).
#   source .gpuhost/activate.sh .gpuhost && [source .fa4/activate-fa4.sh .fa4 &&] \
#     STAGES=tests,sweep,check bash scripts/gpu_front_door.sh
# Stages: tests (tests/gpu/test_front_door.py, tests/gpu/test_head_dims.py), sweep (one group per problem of PROBLEMS),
# check (bench/independent_check.py over those groups). Logs, the database and the tuner's
# cache go to $OUT. PEERS defaults to cutile,torch-cudnn,fa4 (fa4 skipped where not installed).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
STAGES=${STAGES:-tests,sweep,check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FMHA_WORKBENCH_COMMIT=${FMHA_WORKBENCH_COMMIT:-unknown}
export FMHA_WORKBENCH_CACHE=$OUT/autotune.json  # a fresh cache: every class is tuned here
mkdir -p /tmp/front-door
DB=/tmp/front-door/front-door.db  # copied to $OUT at the end, its write-ahead log folded in
if [[ -z ${PEERS:-} ]]; then
  PEERS=cutile,torch-cudnn
  python3 -c "import flash_attn.cute" 2>/dev/null && PEERS=$PEERS,fa4
fi
ROUNDS=${ROUNDS:-6}
GROUPS_FILE=$OUT/groups.json
# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
common="--heads 32 --kv-heads 8 --dtype bfloat16 --autotune --flush-l2"
# name|flags: the issue's three decode figures, then shapes beyond the presets.
default_problems=(
  "B1-k32k|--batch 1 --head-dim 128 --q-len 1 --k-lens 32k"
  "B8-k8k|--batch 8 --head-dim 128 --q-len 1 --k-lens 8k"
  "B32-k4k|--batch 32 --head-dim 128 --q-len 1 --k-lens 4k"
  "B1-k128k|--batch 1 --head-dim 128 --q-len 1 --k-lens 128k"
  "B4-q4-k16k-D64|--batch 4 --head-dim 64 --q-len 4 --k-lens 16k"
  "B64-k1k|--batch 64 --head-dim 128 --q-len 1 --k-lens 1k"
  "D96-prefill|--batch 2 --head-dim 96 --seq-lens 4k --mask causal"
)
problems=("${default_problems[@]}")
if [[ -n ${PROBLEMS:-} ]]; then IFS=';' read -r -a problems <<< "$PROBLEMS"; fi

if stage tests; then
  echo "== tests/gpu/test_front_door.py"
  timeout "${TESTS_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider \
    tests/gpu/test_front_door.py 2>&1 | tail -15
  # The head dims in parallel: none of them times anything.
  timeout "${TESTS_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider \
    tests/gpu/test_head_dims.py -n "${TEST_WORKERS:-6}" 2>&1 | tail -15
fi 2>&1 | tee -a "$OUT/front-door.txt"

if stage sweep; then
  echo "== plain sweeps (--autotune, no preset) with $PEERS"
  echo "{}" > "$GROUPS_FILE"
  for entry in "${problems[@]}"; do
    name=${entry%%|*}; flags=${entry#*|}
    started=$(date +%s)
    # shellcheck disable=SC2086
    timeout "${SWEEP_TIMEOUT:-120}" python3 -m workbench sweep --db "$DB" --backends "$PEERS" \
      $common $flags --rounds "$ROUNDS" --label "front door $name" --json \
      > "$OUT/sweep-$name.json" 2> "$OUT/sweep-$name.err"
    echo "$name exit $? in $(( $(date +%s) - started )) s"
    tail -3 "$OUT/sweep-$name.err"
    remember "$name" "$OUT/sweep-$name.json" "$GROUPS_FILE"
  done
  python3 - "$FMHA_WORKBENCH_CACHE" <<'EOF'
import json, sys
try:
    cache = json.load(open(sys.argv[1]))
except Exception as e:
    print("no tuner cache:", e); raise SystemExit(0)
for key, hit in cache.items():
    c, t = hit["config"], hit["tuning"]
    print(key, "pack", c["pack_gqa"], "splits", c["kv_splits"], "tile_n", c["tile_n"],
          "lat", c["k_latency"], c["v_latency"], f"{t['seconds']} s", t.get("sustained_us"))
EOF
fi 2>&1 | tee -a "$OUT/front-door.txt"

if stage check; then
  echo "== the groups' launches timed by triton"
  timeout "${CHECK_TIMEOUT:-200}" python3 bench/independent_check.py --db "$DB" \
    --groups "$(group_ids "$GROUPS_FILE")" --rounds "${CHECK_ROUNDS:-6}" \
    --json "$OUT/front-door-independent.json" --markdown "$OUT/front-door-independent.md" \
    2>&1 | tee "$OUT/front-door-independent.log" | tail -30
fi 2>&1 | tee -a "$OUT/front-door.txt"
save_db "$DB" "$OUT/front-door.db"
