#!/usr/bin/env bash
# The workbench's whole GPU flow in one device call, logs and the database under $OUT:
#   source .gpuhost/activate.sh .gpuhost && bash scripts/gpu_workbench.sh [tests|flow|ladder|all]
#   tests   backends, timing fidelity, crash isolation (tests/gpu_workbench)
#   flow    sweep every backend as one group (causal and not), compare, export
#   ladder  the optimization ladder on cuTile, 1k-16k causal
# CUTILE_FLAGS picks the cuTile config of the peer sweep (default: the Hopper-tuned knobs).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
DB=$OUT/workbench.db
wb() { python3 -m workbench "$@"; }
SHAPE=(--batch 4 --heads 32 --head-dim 128 --dtype float16)
CUTILE_FLAGS=${CUTILE_FLAGS:---tile-m 64 --tile-n 64 --fast-math --k-split --remap --occupancy 2}
rc=0

if [[ $mode == tests || $mode == all ]]; then
  echo "== workbench GPU tests"
  python3 -m pytest tests/gpu_workbench -q -p no:cacheprovider -rfEs -s 2>&1 | tee "$OUT/workbench-tests.txt"
  rc=${PIPESTATUS[0]}
fi

if [[ $mode == flow || $mode == all ]]; then
  {
    echo "== backends"; wb backends
    for mask in causal none; do
      echo "== sweep: every backend on the same inputs, mask $mask"
      # The cuTile knobs apply to the cutile run; the peers ignore them.
      wb sweep --backends cutile,torch-cudnn,torch-flash,naive --seq-lens 1k-16k "${SHAPE[@]}" \
        --mask "$mask" $CUTILE_FLAGS --label "peers $mask" --db "$DB" || echo "sweep exit $?"
    done
    wb runs --db "$DB"
    for group in 1 2; do echo "== compare group $group"; wb compare --group "$group" --db "$DB"; done
    wb export --csv "$OUT/workbench-export.csv" --db "$DB"
  } 2>&1 | tee "$OUT/workbench-flow.txt"
fi

if [[ $mode == ladder || $mode == all ]]; then
  echo "== ladder"
  wb ladder --backend cutile --seq-lens 1k-16k --samples 20 --min-time 0.2 --db "$DB" \
    --label "ladder H200" 2>&1 | tee "$OUT/workbench-ladder.txt"
  wb ladder --help >/dev/null
fi
exit "$rc"
