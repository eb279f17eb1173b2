#!/usr/bin/env bash
# The workbench's whole GPU flow in one device call, logs and the database under $OUT:
#   source .gpuhost/activate.sh .gpuhost && bash scripts/gpu_workbench.sh [tests|flow|ladder|all]
#   tests   backends, timing fidelity, crash isolation (tests/gpu_workbench)
#   flow    sweep every backend as one group (causal and not), compare, export
#   ladder  the optimization ladder on cuTile, causal (LADDER_SEQ, default 1k-16k), exported
# At most 8 files come back from a device call's $OUT: keep the modes of one call within that.
# CUTILE_FLAGS picks the cuTile config of the peer sweep (default: the Hopper-tuned knobs).
# Put FMHA_WORKBENCH_COMMIT=<commit> in front: the device's copy of the tree has no .git.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# The device gets a copy of the tree without .git: pass the commit for the runs' metadata.
export FMHA_WORKBENCH_COMMIT=${FMHA_WORKBENCH_COMMIT:-unknown}
# A hang must not eat the whole device call: the engine gives up on a point after this long.
export FMHA_WORKBENCH_ENGINE_TIMEOUT=${FMHA_WORKBENCH_ENGINE_TIMEOUT:-180}
DB=$OUT/workbench.db
wb() { python3 -m workbench "$@"; }
SHAPE=(--batch 4 --heads 32 --head-dim 128 --dtype float16)
CUTILE_FLAGS=${CUTILE_FLAGS:---autotune --fast-math --k-split --remap}
TESTS_TIMEOUT=${TESTS_TIMEOUT:-220}
FLOW_TIMEOUT=${FLOW_TIMEOUT:-330}
LADDER_TIMEOUT=${LADDER_TIMEOUT:-300}
LADDER_SEQ=${LADDER_SEQ:-1k-16k}
rc=0

if [[ $mode == tests || $mode == all ]]; then
  echo "== workbench GPU tests"
  timeout "$TESTS_TIMEOUT" python3 -m pytest tests/gpu_workbench -q -p no:cacheprovider -rfEs -s \
    2>&1 | tee "$OUT/workbench-tests.txt"
  rc=${PIPESTATUS[0]}
fi

if [[ $mode == flow-inner ]]; then
  echo "== backends"; wb backends
  for mask in causal none; do
    echo "== sweep: every backend on the same inputs, mask $mask"
    # The cuTile knobs apply to the cutile run; the peers ignore them.
    # shellcheck disable=SC2086
    wb sweep --backends cutile,torch-cudnn,torch-flash,naive --seq-lens 1k-16k "${SHAPE[@]}" \
      --mask "$mask" $CUTILE_FLAGS --label "peers $mask" --db "$DB" || echo "sweep exit $?"
  done
  wb runs --db "$DB"
  for group in 1 2; do echo "== compare group $group"; wb compare --group "$group" --db "$DB"; done
  wb export --csv "$OUT/workbench-export.csv" --db "$DB"
  exit 0
fi

if [[ $mode == flow || $mode == all ]]; then
  timeout "$FLOW_TIMEOUT" bash "$0" flow-inner 2>&1 | tee "$OUT/workbench-flow.txt"
fi

if [[ $mode == ladder || $mode == all ]]; then
  echo "== ladder"
  # Its own database, so the export below holds the ladder group and nothing else.
  LADDER_DB=$OUT/workbench-ladder.db
  timeout "$LADDER_TIMEOUT" python3 -m workbench ladder --backend cutile --seq-lens "$LADDER_SEQ" \
    --warmup 2 --samples 10 --min-time 0.1 --db "$LADDER_DB" --label "ladder H200" \
    2>&1 | tee "$OUT/workbench-ladder.txt"
  wb export --csv "$OUT/workbench-ladder.csv" --db "$LADDER_DB"
fi
exit "$rc"
