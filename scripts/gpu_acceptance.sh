#!/usr/bin/env bash
# The workbench-as-instrument run in one device call, results under $OUT:
#   1. the window, offscreen, runs one group per mask of cuTile (autotuned), cuDNN, FA4 and FA2
#      (B=4 H=32 D=128 fp16, SEQ) into $OUT/h200.db and saves Compare's screenshots;
#   2. the benchmark preset runs the same groups again right after (back-to-back agreement);
#   3. bench/independent_check.py times the window's launches with triton's do_bench_cudagraph;
#   4. the generated report.
# The machine needs the cuTile, FA4 and Qt bundles (shared/gpu-host/pack-*.sh; each script's
# header gives the chain of calls). FMHA_WORKBENCH_COMMIT=<commit> in front: no .git there.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 QT_QPA_PLATFORM=offscreen
export FMHA_WORKBENCH_COMMIT=${FMHA_WORKBENCH_COMMIT:-unknown}
export FMHA_WORKBENCH_ENGINE_TIMEOUT=${FMHA_WORKBENCH_ENGINE_TIMEOUT:-300}
# The tuner's picks of the last full tuning run on this GPU (it retunes where they are stale).
cp bench/results/h200-autotune.json /tmp/h200-autotune.json
export FMHA_WORKBENCH_CACHE=/tmp/h200-autotune.json
SEQ=${SEQ:-1k-16k}
ROUNDS=${ROUNDS:-8}
BACKENDS=${BACKENDS:-cutile,torch-cudnn,fa4,torch-flash}
DB=$OUT/h200.db
SHAPE=(--batch 4 --heads 32 --head-dim 128 --dtype float16)
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  python3 -m workbench backends
} 2>&1
# At most 8 files come back from a device call: scratch goes to /tmp, results to $OUT.
SCRATCH=$(mktemp -d)

echo "== 1. the window"
timeout "${WINDOW_TIMEOUT:-300}" python3 scripts/window_group.py --db "$DB" --backends "$BACKENDS" \
  "${SHAPE[@]}" --seq-lens "$SEQ" --autotune --fast-math --k-split --remap --rounds "$ROUNDS" \
  --masks causal,none --label "window" --out "$SCRATCH" > "$SCRATCH/window.json"
echo "window exit $?: $(cat "$SCRATCH/window.json")"
cp "$SCRATCH"/compare-*.png "$SCRATCH"/window-none.png "$OUT"/ 2>/dev/null
groups=$(python3 -c 'import json,sys; print(" ".join(f"--group {g}" for g in json.load(open(sys.argv[1]))["groups"].values()))' "$SCRATCH/window.json")
ids=$(python3 -c 'import json,sys; print(",".join(str(g) for g in json.load(open(sys.argv[1]))["groups"].values()))' "$SCRATCH/window.json")

echo "== 2. the same groups again, back to back"
timeout "${REPEAT_TIMEOUT:-200}" python3 bench/bench_fmha.py --db "$DB" --ns "$SEQ" --rounds "$ROUNDS" \
  --backends "$BACKENDS" --label repeat > "$SCRATCH/repeat.txt" 2>&1
echo "repeat exit $?"; tail -3 "$SCRATCH/repeat.txt"
repeat=$(python3 -c 'import sys; a=[int(x) for x in sys.argv[1].split(",")]; print(",".join(f"{g}:{g+len(a)}" for g in a))' "$ids")

echo "== 3. the same launches timed by triton"
timeout "${CHECK_TIMEOUT:-200}" python3 bench/independent_check.py --db "$DB" --groups "$ids" \
  --rounds "$ROUNDS" --repeat-of "$repeat" --json "$OUT/h200-independent.json" \
  --markdown "$OUT/h200-independent.md" 2>&1 | tail -40

echo "== 4. report"
# shellcheck disable=SC2086
python3 -m workbench report --db "$DB" $groups
