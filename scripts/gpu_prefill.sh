#!/usr/bin/env bash
# Prefill against FlashAttention-4 on the H200 through the workbench's own CLI (issue #35), one
# stage list per device call, logs and the database under $OUT:
#   source .gpuhost/activate.sh .gpuhost && source .fa4/activate-fa4.sh .fa4 && \
#     STAGES=prefill,inputs bash scripts/gpu_prefill.sh
# Stages (in this order when listed together):
#   tests    every GPU test (tests/gpu, tests/gpu_workbench)
#   machine  `machine --measure` (the dense matmul ceiling the table quotes)
#   prefill  one group per problem of the issue's table: cuTile autotuned (fast math, K split,
#            remap) with cuDNN and FA4 (PEERS), medians and noise stored; D = 64, bf16 and GQA
#            classes are tuned on the way and land in the tuner's cache ($OUT/h200-autotune.json)
#   inputs   the model-inputs ladder: (B, H, N, D) against (B, N, H, D) views under the graph
#            timer, and the prepared launcher against one-shot attention() launched eagerly
#   check    bench/independent_check.py: the prefill groups' launches timed by triton
#   explore  bench/explore_configs.py: EXPLORE_CONFIGS (a config list) at EXPLORE_NS, head dim
#            EXPLORE_DIM, masks EXPLORE_MASKS, beside cuDNN, each config checked against float64
#   profile  `profile` (Nsight Compute) on stored points, PROFILE_POINTS="RUN:N RUN:N" (ours and
#            FA4 on one problem: where the cycles of each go, with the top warp stalls)
#   variants cuTile launches on one problem, each stored and then profiled: VARIANTS="name|flags;
#            name|flags" (knob flags), VARIANT_SHAPE (problem flags), VARIANT_N (one length)
#   report   the prefill groups' generated table
# The database and the group ids live in $STATE (/tmp) across calls while the machine is warm;
# every call copies the database to $OUT. FMHA_WORKBENCH_COMMIT=<commit> in front: the device's
# .git is stale. The bundles' chain of calls: scripts/gpu_session.sh's header.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
STATE=${STATE:-/tmp/fmha-prefill}
STAGES=${STAGES:-prefill,inputs,check,report}
mkdir -p "$OUT" "$STATE"
export PYTHONUNBUFFERED=1 FMHA_WORKBENCH_COMMIT=${FMHA_WORKBENCH_COMMIT:-unknown}
export FMHA_WORKBENCH_MACHINE=${FMHA_WORKBENCH_MACHINE:-$STATE/machine.json}
export FMHA_WORKBENCH_ENGINE_TIMEOUT=${FMHA_WORKBENCH_ENGINE_TIMEOUT:-400}
[[ -f $STATE/h200-autotune.json ]] || cp bench/results/h200-autotune.json "$STATE/h200-autotune.json"
export FMHA_WORKBENCH_CACHE=$STATE/h200-autotune.json
DB=$STATE/h200-prefill.db
# SEED_DB: a committed database the new groups are added to (bench/results/h200-prefill.db).
[[ -n ${SEED_DB:-} && ! -f $DB ]] && cp "$SEED_DB" "$DB"
PEERS=${PEERS:-cutile,torch-cudnn,fa4}
ROUNDS=${ROUNDS:-6}
TUNED=(--autotune --fast-math --k-split --remap)
# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
GROUPS_FILE=$STATE/groups.json
groups() { group_ids "$GROUPS_FILE"; }

{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
} 2>&1 | tee -a "$OUT/session.txt"

if stage tests; then
  echo "== GPU tests"
  gpu_tests
fi 2>&1 | tee -a "$OUT/tests.txt"

if stage machine; then
  echo "== machine ceilings"
  python3 -m workbench machine --measure --db "$DB"
fi 2>&1 | tee -a "$OUT/session.txt"

if stage prefill; then
  echo "== prefill groups"
  # name|flags: the issue's table, one group per problem.
  problems=(
    "mha-causal|--batch 4 --heads 32 --head-dim 128 --dtype float16 --mask causal --seq-lens 1k-16k"
    "mha-none|--batch 4 --heads 32 --head-dim 128 --dtype float16 --mask none --seq-lens 1k-16k"
    "8b-prefill|--batch 1 --heads 32 --kv-heads 8 --head-dim 128 --dtype bfloat16 --mask causal --seq-lens ${GQA_SEQ:-8k}"
    "70b-none|--batch 2 --heads 64 --kv-heads 8 --head-dim 128 --dtype bfloat16 --mask none --seq-lens ${GQA_SEQ:-8k}"
    "70b-causal|--batch 2 --heads 64 --kv-heads 8 --head-dim 128 --dtype bfloat16 --mask causal --seq-lens ${GQA_SEQ:-8k}"
    "d64-none|--batch 4 --heads 32 --head-dim 64 --dtype float16 --mask none --seq-lens ${D64_SEQ:-4k}"
  )
  # EXTRA_PREFILL: one more "name|flags" entry (the D = 256 group), kept whole.
  [[ -n ${EXTRA_PREFILL:-} ]] && problems+=("$EXTRA_PREFILL")
  for entry in "${problems[@]}"; do
    name=${entry%%|*}; flags=${entry#*|}
    [[ -n ${ONLY:-} && ",$ONLY," != *",$name,"* ]] && continue
    # shellcheck disable=SC2086
    timeout "${GROUP_TIMEOUT:-300}" python3 -m workbench sweep --db "$DB" --backends "$PEERS" \
      $flags "${TUNED[@]}" --rounds "$ROUNDS" --label "prefill $name" --json > "$STATE/prefill-$name.json"
    echo "$name exit $?"
    UNIT=tflops remember "$name" "$STATE/prefill-$name.json" "$GROUPS_FILE"
  done
  cp "$FMHA_WORKBENCH_CACHE" "$OUT/h200-autotune.json"
fi 2>&1 | tee -a "$OUT/session.txt"

if stage inputs; then
  echo "== a model's inputs: layout and one-shot calls"
  # shellcheck disable=SC2206
  shape=(--backend "${INPUT_BACKEND:-cutile}" ${INPUT_SHAPE:---batch 4 --heads 32 --head-dim 128 --dtype float16} --mask causal)
  timeout "${LADDER_TIMEOUT:-240}" python3 -m workbench ladder --db "$DB" "${shape[@]}" \
    --preset model-inputs --seq-lens "${INPUT_SEQ:-1k-16k}" \
    --rounds "$ROUNDS" --label "model inputs, graph" 2>&1 | tail -20
  timeout "${LADDER_TIMEOUT:-240}" python3 -m workbench ladder --db "$DB" "${shape[@]}" \
    --preset model-inputs --seq-lens "${EAGER_SEQ:-1k,2k}" --no-graph \
    --rounds "$ROUNDS" --label "model inputs, eager" 2>&1 | tail -20
fi 2>&1 | tee -a "$OUT/session.txt"

if stage check; then
  echo "== the prefill groups' launches timed by triton"
  timeout "${CHECK_TIMEOUT:-300}" python3 bench/independent_check.py --db "$DB" \
    --groups "${CHECK_GROUPS:-$(groups)}" --rounds "${CHECK_ROUNDS:-4}" \
    --json "$OUT/h200-prefill-independent.json" --markdown "$OUT/h200-prefill-independent.md" \
    2>&1 | tail -40
fi 2>&1 | tee -a "$OUT/session.txt"

if stage explore; then
  echo "== configs explored (bench/explore_configs.py)"
  timeout "${EXPLORE_TIMEOUT:-300}" python3 bench/explore_configs.py \
    --configs "@${EXPLORE_CONFIGS:?EXPLORE_CONFIGS=bench/configs/FILE.json}" \
    --ns "${EXPLORE_NS:-2048,4096,16384}" --dim "${EXPLORE_DIM:-128}" \
    --masks "${EXPLORE_MASKS:-none}" --rounds "${EXPLORE_ROUNDS:-3}" --precompile 4 \
    --out "$OUT/explore-$(basename "$EXPLORE_CONFIGS" .json)"
  echo "explore exit $?"
fi 2>&1 | tee -a "$OUT/session.txt"

if stage profile; then
  echo "== Nsight Compute on stored points"
  find_ncu
  # FA4 compiles its kernel in the profiled process: keep its cubin for bench/sass_loop.py.
  export CUTE_DSL_KEEP_CUBIN=1 CUTE_DSL_DUMP_DIR=$OUT/fa4-cubin
  mkdir -p "$OUT/fa4-cubin" "$OUT/profiles"
  for point in ${PROFILE_POINTS:?PROFILE_POINTS=\"RUN:N ...\"}; do
    timeout "${PROFILE_TIMEOUT:-200}" python3 -m workbench profile "${point%%:*}" \
      --seq-len "${point#*:}" --db "$DB"
    echo "profile $point exit $?"
  done
  # Every metric each report holds, and its PC samples by SASS instruction, for reading back
  # without ncu.
  for report in "$STATE"/profiles/*.ncu-rep; do
    [[ -f $report ]] || continue
    name=$(basename "$report" .ncu-rep)
    ncu --import "$report" --csv --page raw --print-units base > "$OUT/profiles/$name.csv"
    ncu --import "$report" --csv --page source --print-source sass \
      > "$OUT/profiles/$name-source.csv"
  done
fi 2>&1 | tee -a "$OUT/session.txt"

if stage variants; then
  echo "== cuTile variants on one problem, each profiled"
  find_ncu
  length=${VARIANT_N:-8192}
  IFS=';' read -ra entries <<< "${VARIANTS:?VARIANTS=\"name|flags;name|flags\"}"
  for entry in "${entries[@]}"; do
    name=${entry%%|*}; flags=${entry#*|}
    # shellcheck disable=SC2086
    timeout "${GROUP_TIMEOUT:-300}" python3 -m workbench sweep --db "$DB" --backend cutile \
      ${VARIANT_SHAPE:---batch 4 --heads 32 --head-dim 128 --dtype float16 --mask none} \
      --seq-lens "$length" $flags --rounds "${VARIANT_ROUNDS:-3}" --label "variant $name" \
      --json > "$STATE/variant-$name.json"
    run=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; p=r["points"][0]
print(r["id"]); print(r["id"], round(p["latency_ms"]*1e3, 1), "us", round(p["tflops"]), "TFLOP/s", file=sys.stderr)' \
      "$STATE/variant-$name.json") || { echo "variant $name: no run"; continue; }
    echo "variant $name: run $run"
    timeout "${PROFILE_TIMEOUT:-200}" python3 -m workbench profile "$run" --seq-len "$length" \
      --db "$DB" | grep -v "^\s*$"
  done
fi 2>&1 | tee -a "$OUT/session.txt"

if stage report; then
  echo "== report"
  report_groups "$DB" "$GROUPS_FILE"
fi 2>&1 | tee -a "$OUT/session.txt"

save_db "$DB" "$OUT/h200-prefill.db"
[[ -f $GROUPS_FILE ]] && cp "$GROUPS_FILE" "$OUT/prefill-groups.json"
exit 0
