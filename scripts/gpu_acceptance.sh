#!/usr/bin/env bash
# The workbench-as-instrument run on the H200, results under $OUT. Stages (STAGES, in order):
#   window  the window, offscreen, runs one group per mask of cuTile (autotuned), cuDNN, FA4 and
#           FA2 (B=4 H=32 D=128 fp16, SEQ) and saves Compare's screenshots;
#   repeat  the benchmark preset runs the same groups again right after (back-to-back agreement);
#   check   bench/independent_check.py times the window's launches with triton's
#           do_bench_cudagraph, and sets the repeat beside the window's groups;
#   report  the generated table.
# All four fit one call at ROUNDS=8 (about 480 s on the H200). A round of both masks costs about
# 10 s in the window and in the repeat, and a round of the check (CHECK_ROUNDS, default ROUNDS)
# about 8 s, so with more rounds give each stage its own call while the machine is warm: the
# database and the window's group ids live in $STATE (/tmp), and every call copies the database
# to $OUT. e.g. STAGES=window ROUNDS=32, then STAGES=repeat ROUNDS=32, then
# STAGES=check,report CHECK_ROUNDS=48.
# The machine needs the cuTile, FA4 and Qt bundles (shared/gpu-host/pack-*.sh; each script's
# header gives the chain of calls). FMHA_WORKBENCH_COMMIT=<commit> in front: its .git is stale.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
STATE=${STATE:-/tmp/fmha-acceptance}
STAGES=${STAGES:-window,repeat,check,report}
mkdir -p "$OUT" "$STATE"
export PYTHONUNBUFFERED=1 QT_QPA_PLATFORM=offscreen
export FMHA_WORKBENCH_COMMIT=${FMHA_WORKBENCH_COMMIT:-unknown}
export FMHA_WORKBENCH_ENGINE_TIMEOUT=${FMHA_WORKBENCH_ENGINE_TIMEOUT:-300}
# The tuner's picks of the last full tuning run on this GPU (it retunes where they are stale).
[[ -f $STATE/h200-autotune.json ]] || cp bench/results/h200-autotune.json "$STATE/h200-autotune.json"
export FMHA_WORKBENCH_CACHE=$STATE/h200-autotune.json
SEQ=${SEQ:-1k-16k}
ROUNDS=${ROUNDS:-8}
CHECK_ROUNDS=${CHECK_ROUNDS:-$ROUNDS}
BACKENDS=${BACKENDS:-cutile,torch-flash,torch-cudnn,fa4}  # the window's list order
DB=$STATE/h200.db
SHAPE=(--batch 4 --heads 32 --head-dim 128 --dtype float16)
stage() { [[ ",$STAGES," == *",$1,"* ]]; }
# The window's groups (mask -> id) as "a,b" and as "--group a --group b".
window_ids() { python3 -c 'import json,sys; print(sys.argv[2].join(f"{sys.argv[3]}{g}" for g in json.load(open(sys.argv[1]))["groups"].values()))' "$STATE/window.json" "$1" "$2"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  python3 -m workbench backends
} 2>&1

if stage window; then
  echo "== the window"
  timeout "${WINDOW_TIMEOUT:-300}" python3 scripts/window_group.py --db "$DB" --backends "$BACKENDS" \
    "${SHAPE[@]}" --seq-lens "$SEQ" --autotune --fast-math --k-split --remap --rounds "$ROUNDS" \
    --masks causal,none --label "window" --out "$STATE" > "$STATE/window.json"
  echo "window exit $?: $(cat "$STATE/window.json")"
  cp "$STATE"/compare-*.png "$STATE"/window-none.png "$OUT"/ 2>/dev/null
fi
ids=$(window_ids "," "")

if stage repeat; then
  echo "== the same groups again, back to back"
  timeout "${REPEAT_TIMEOUT:-200}" python3 bench/bench_fmha.py --db "$DB" --ns "$SEQ" \
    --rounds "$ROUNDS" --backends "$BACKENDS" --label repeat > "$STATE/repeat.txt" 2>&1
  echo "repeat exit $?"; tail -3 "$STATE/repeat.txt"
fi

if stage check; then
  echo "== the same launches timed by triton"
  # The repeat's groups are the ones made right after the window's, in the same mask order.
  repeat=$(python3 -c 'import sys; a=[int(x) for x in sys.argv[1].split(",")]; print(",".join(f"{g}:{g+len(a)}" for g in a))' "$ids")
  timeout "${CHECK_TIMEOUT:-200}" python3 bench/independent_check.py --db "$DB" --groups "$ids" \
    --rounds "$CHECK_ROUNDS" --repeat-of "$repeat" --json "$OUT/h200-independent.json" \
    --markdown "$OUT/h200-independent.md" 2>&1 | tail -40
fi

if stage report; then
  echo "== report"
  # shellcheck disable=SC2046
  python3 -m workbench report --db "$DB" $(window_ids " " "--group ")
fi
# A copy taken while the write-ahead log still holds pages would lose them.
python3 -c 'import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute("pragma wal_checkpoint(TRUNCATE)")' "$DB"
cp "$DB" "$OUT/h200.db"
