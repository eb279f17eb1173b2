#!/usr/bin/env bash
# Issue #55 on the GPU, one device call: the example plugins' GPU tests
# (tests/gpu/test_example_plugins_on_gpu.py: each beside the reference within tolerance, in
# parallel; each in a group beside cutile timed on the device, one at a time since they time),
# then one group per problem through the command line of cutile and torch-cudnn beside the three
# GPU examples (cutile-naive, triton-attention, torch-softcap, all inputs="cuda" and timed by the
# GPU sampler), into one database copied to $OUT with the groups' report. About 3 minutes on an
# H100; the timeouts bound it under 6.
#   source .gpuhost/activate.sh .gpuhost && bash scripts/gpu_plugins.sh
# STAGES=tests,sweep picks stages; PROBLEMS="name|flags;…" replaces the problems; ROUNDS,
# TESTS_TIMEOUT (each of the two test runs) and SWEEP_TIMEOUT (each problem) bound the stages.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
STAGES=${STAGES:-tests,sweep}
mkdir -p "$OUT" /tmp/gpu-plugins
export PYTHONUNBUFFERED=1 FMHA_WORKBENCH_COMMIT=${FMHA_WORKBENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
DB=/tmp/gpu-plugins/plugins.db  # copied to $OUT at the end, its write-ahead log folded in
GROUPS_FILE=$OUT/plugin-groups.json
# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
nvidia-smi -L

if stage tests; then
  workers=""
  python3 -c "import xdist" 2>/dev/null && workers="-n ${TEST_WORKERS:-4}"
  echo "== the examples beside the reference (parallel: nothing timed is asserted)"
  # shellcheck disable=SC2086
  timeout -k 10 "${TESTS_TIMEOUT:-120}" python3 -m pytest -q -p no:cacheprovider -rfEs \
    tests/gpu/test_example_plugins_on_gpu.py -k beside_the_reference $workers 2>&1 | tail -15
  echo "== the examples in a group beside cutile (one at a time: each compares two timings)"
  timeout -k 10 "${TESTS_TIMEOUT:-120}" python3 -m pytest -q -p no:cacheprovider -rfEs -s \
    tests/gpu/test_example_plugins_on_gpu.py -k in_a_group > "$OUT/plugins-group-tests.txt" 2>&1
  echo "exit $?"
  grep -E "copies alone" "$OUT/plugins-group-tests.txt"
  tail -12 "$OUT/plugins-group-tests.txt"
fi 2>&1 | tee "$OUT/plugins-tests.txt"

PLUGINS=(--plugin examples/cutile_naive.py --plugin examples/triton_attention.py
         --plugin examples/torch_softcap.py)
KNOBS=(--plugin-knob tile=64 --plugin-knob BLOCK_M=128 --plugin-knob BLOCK_N=64
       --plugin-knob num_warps=8 --plugin-knob softcap=0)
BACKENDS=cutile,torch-cudnn,cutile-naive,triton-attention,torch-softcap
# name|flags: float16 (cutile-naive's one dtype), the head dims and masks all five take.
default_problems=(
  "D64-causal|--batch 4 --heads 16 --head-dim 64 --seq-lens 1k,4k --mask causal"
  "D128-none-gqa|--batch 2 --heads 32 --kv-heads 8 --head-dim 128 --seq-lens 2k,8k --mask none"
)
problems=("${default_problems[@]}")
if [[ -n ${PROBLEMS:-} ]]; then IFS=';' read -r -a problems <<< "$PROBLEMS"; fi

if stage sweep; then
  echo "== groups of $BACKENDS"
  echo "{}" > "$GROUPS_FILE"
  for entry in "${problems[@]}"; do
    name=${entry%%|*}; flags=${entry#*|}
    started=$(date +%s)
    # shellcheck disable=SC2086
    timeout -k 10 "${SWEEP_TIMEOUT:-75}" python3 -m workbench "${PLUGINS[@]}" sweep --db "$DB" \
      --backends "$BACKENDS" --dtype float16 --flush-l2 --rounds "${ROUNDS:-4}" $flags \
      "${KNOBS[@]}" --label "plugins $name" --json \
      > "$OUT/plugins-$name.json" 2> "$OUT/plugins-$name.err"
    echo "$name exit $? in $(( $(date +%s) - started )) s"
    tail -3 "$OUT/plugins-$name.err"
    remember "$name" "$OUT/plugins-$name.json" "$GROUPS_FILE"
    # Each point's timer: graph or events for all five, cpu would mean the wall clock.
    python3 - "$OUT/plugins-$name.json" <<'EOF'
import json, sys
try:
    done = json.load(open(sys.argv[1]))
except Exception as e:
    print("no result:", e); raise SystemExit(0)
for r in done["runs"]:
    print(" ", r["backend"], "timers", sorted({p["extra"].get("timer") for p in r["points"]}),
          "max err", max((p["max_abs_err"] for p in r["points"]), default=None))
EOF
  done
  [[ $(group_ids "$GROUPS_FILE") ]] && report_groups "$DB" "$GROUPS_FILE"
  save_db "$DB" "$OUT/plugins.db"
fi 2>&1 | tee "$OUT/plugins-sweep.txt"
