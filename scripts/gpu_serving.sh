#!/usr/bin/env bash
# Issue #54 on the GPU in one device call (under 10 minutes on an H100): the serving kernels' and
# backends' GPU tests, then through the workbench's own CLI the issue's goal groups into one
# database, then the same launches timed by triton (bench/independent_check.py). Logs under $OUT.
#   source .gpuhost/activate.sh .gpuhost && [source .fa4/activate-fa4.sh .fa4 &&] \
#     bash scripts/gpu_serving.sh
# Stages (STAGES, default tests,sweep,check):
#   tests  tests/gpu/test_serving_kernels.py, tests/gpu/test_serving_backends.py and
#          tests/test_cutile_serving.py (the backend's torch glue on CPU tensors, the emulator)
#   sweep  one group per entry of GROUPS_LIST (cutile beside torch-cudnn and fa4 where installed):
#          paged decode at P = 16, 64, 256 and the contiguous ragged decode on serving-decode-64's
#          lengths (the cost of paging), serving-prefill-varlen (torch-flash too: a padded causal
#          prefill needs no mask), then our dense contiguous decode and a paged one on 16 × 8k
#          (the issue's paged/contiguous ratio on equal lengths)
#   check  bench/independent_check.py over the groups of CHECK_NAMES the sweeps made (each of
#          its rows is printed as it is timed, so a stage cut short still shows its groups)
# TESTS_TIMEOUT (140 s), SWEEP_TIMEOUT (each sweep, 90 s), SWEEP_BUDGET (no sweep starts past
# it, 200 s) and CHECK_TIMEOUT (120 s) keep the call within 10 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
STAGES=${STAGES:-tests,sweep,check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FMHA_WORKBENCH_COMMIT=${FMHA_WORKBENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
mkdir -p /tmp/serving
DB=/tmp/serving/serving.db  # copied to $OUT at the end, its write-ahead log folded in
rm -f "$DB" "$DB-wal" "$DB-shm"
GROUPS_FILE=$OUT/groups.json
ROUNDS=${ROUNDS:-3}
# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
nvidia-smi -L
python3 -m workbench backends 2>&1 | tee "$OUT/backends.txt"

PEERS=${PEERS:-torch-cudnn}
python3 -c "import flash_attn.cute" 2>/dev/null && PEERS=$PEERS,fa4
decode="--preset serving-decode-64"
# The same batch on a contiguous cache: the preset's lengths and heads without its pages.
decode_lens="--lengths lognormal:n=64,mean=4k,min=1k,max=32k,seed=1 --heads 32 --kv-heads 8 --head-dim 128 --dtype bfloat16 --q-len 1 --mask none"
uniform="--lengths $(printf '8k,%.0s' {1..15})8k --heads 32 --kv-heads 8 --head-dim 128 --dtype bfloat16 --q-len 1 --mask none --pack-gqa --kv-splits auto"
# name|backends|flags. The paged kernel's key block is its own for the page unless --tile-n is
# typed (kernels/cutile/paged.py: 64 keys at P16, where 128 would spill, 128 from P32 up).
default_groups=(
  "decode64-P16|cutile,$PEERS|$decode --page-size 16"
  "decode64-P64|cutile,$PEERS|$decode --page-size 64"
  "decode64-P256|cutile,$PEERS|$decode --page-size 256"
  "decode64-contiguous|cutile,$PEERS|$decode_lens --kv-cache contiguous --tile-n 64"
  "prefill-varlen|cutile,torch-flash,$PEERS|--preset serving-prefill-varlen"
  "uniform16x8k-dense|cutile,$PEERS|--batch 16 --heads 32 --kv-heads 8 --head-dim 128 --dtype bfloat16 --q-len 1 --k-lens 8k --pack-gqa --kv-splits auto --tile-n 128"
  "uniform16x8k-P64|cutile,$PEERS|$uniform --page-size 64"
  "uniform16x8k-P16|cutile,$PEERS|$uniform --page-size 16"
)
groups=("${default_groups[@]}")
if [[ -n ${GROUPS_LIST:-} ]]; then IFS=';' read -r -a groups <<< "$GROUPS_LIST"; fi

if stage tests; then
  echo "== GPU tests of the serving kernels and backends"
  workers=""
  python3 -c "import xdist" 2>/dev/null && workers="-n ${TEST_WORKERS:-6}"
  # shellcheck disable=SC2086
  timeout -s INT -k 10 "${TESTS_TIMEOUT:-140}" python3 -m pytest -q -p no:cacheprovider -rfEs \
    tests/gpu/test_serving_kernels.py tests/gpu/test_serving_backends.py \
    tests/test_cutile_serving.py $workers > "$OUT/gpu-tests.txt" 2>&1
  echo "GPU tests: exit $?"; tail -30 "$OUT/gpu-tests.txt"
fi 2>&1 | tee -a "$OUT/serving.txt"

if stage sweep; then
  echo "== the issue's groups through the CLI (rounds $ROUNDS, L2 flushed)"
  echo "{}" > "$GROUPS_FILE"
  begun=$(date +%s)
  for entry in "${groups[@]}"; do
    IFS='|' read -r name backends flags <<< "$entry"
    if (( $(date +%s) - begun > ${SWEEP_BUDGET:-200} )); then
      echo "$name: skipped, the sweeps' budget of ${SWEEP_BUDGET:-200} s is spent"; continue
    fi
    started=$(date +%s)
    # shellcheck disable=SC2086
    timeout -s INT -k 10 "${SWEEP_TIMEOUT:-90}" python3 -m workbench sweep --db "$DB" \
      --backends "$backends" $flags --flush-l2 --rounds "$ROUNDS" --label "serving $name" \
      --json > "$OUT/sweep-$name.json" 2> "$OUT/sweep-$name.err"
    echo "$name exit $? in $(( $(date +%s) - started )) s"
    tail -3 "$OUT/sweep-$name.err"
    remember "$name" "$OUT/sweep-$name.json" "$GROUPS_FILE"
  done
  for run in $(python3 -c 'import sqlite3,sys; print(*[r[0] for r in sqlite3.connect(sys.argv[1]).execute("select id from runs order by id")])' "$DB" 2>/dev/null); do
    python3 -m workbench show --db "$DB" "$run"
  done > "$OUT/show.txt" 2>&1
  report_groups "$DB" "$GROUPS_FILE" > "$OUT/report.md" 2>&1
  tail -40 "$OUT/report.md"
fi 2>&1 | tee -a "$OUT/serving.txt"

if stage check; then
  names=${CHECK_NAMES:-decode64-P16,decode64-P64,decode64-contiguous,prefill-varlen,uniform16x8k-dense}
  checked=$(python3 -c 'import json,sys; g=json.load(open(sys.argv[1])); w=sys.argv[2].split(","); print(",".join(i for i, n in g.items() if n in w))' "$GROUPS_FILE" "$names" 2>/dev/null)
  echo "== the launches of groups $checked ($names) timed by triton"
  timeout -s INT -k 10 "${CHECK_TIMEOUT:-120}" python3 bench/independent_check.py --db "$DB" \
    --groups "$checked" --rounds "${CHECK_ROUNDS:-3}" \
    --json "$OUT/serving-independent.json" --markdown "$OUT/serving-independent.md" \
    2>&1 | tee "$OUT/serving-independent.log" | tail -30
fi 2>&1 | tee -a "$OUT/serving.txt"
save_db "$DB" "$OUT/serving.db"
