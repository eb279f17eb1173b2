# Sourced by scripts/gpu_session.sh and scripts/gpu_prefill.sh: stage selection, the group ids a
# call's sweeps made (a JSON file in $STATE, kept across calls while the machine is warm), the
# report of those groups and the database copied back.

stage() { [[ ",$STAGES," == *",$1,"* ]]; }

# find_ncu: put Nsight Compute on PATH (the device image installs it outside).
find_ncu() {
  command -v ncu >/dev/null && return
  local dir
  dir=$(dirname "$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)" 2>/dev/null)
  [[ -n $dir && -x $dir/ncu ]] && export PATH=$dir:$PATH
}

# group_ids FILE: the remembered groups as "1,2,3".
group_ids() { python3 -c 'import json,sys; print(",".join(json.load(open(sys.argv[1]))))' "$1" 2>/dev/null; }

# remember NAME SWEEP_JSON FILE: add the group of a `sweep --json` output to FILE and print each
# run's status with its points (µs, or TFLOP/s with UNIT=tflops).
remember() {
  python3 - "$2" "$3" "$1" "${UNIT:-us}" <<'EOF'
import json, sys
try:
    done = json.load(open(sys.argv[1]))
except Exception as e:
    print("no result:", e); raise SystemExit(0)
try:
    groups = json.load(open(sys.argv[2]))
except Exception:
    groups = {}
groups[str(done["group_id"])] = sys.argv[3]
json.dump(groups, open(sys.argv[2], "w"))
for r in done["runs"]:
    if sys.argv[4] == "tflops":
        shown = [(p["seq_len"], round(p["tflops"] or 0)) for p in r["points"]]
    else:
        shown = [(p["seq_len"], round(p["latency_ms"] * 1e3, 1)) for p in r["points"]]
    print(r["backend"], r["status"], shown)
EOF
}

# report_groups DB FILE: the generated table of the remembered groups.
report_groups() {
  # shellcheck disable=SC2046
  python3 -m workbench report --db "$1" $(group_ids "$2" | tr ',' '\n' | sed 's/^/--group /')
}

# save_db DB DEST: the database, its write-ahead log folded in first (a copy taken while the
# log still holds pages would lose them).
save_db() {
  # Only an existing database: connecting would create an empty file, which a later call's
  # SEED_DB copy then takes for the session's database and skips.
  [[ -f $1 ]] || return 0
  python3 -c 'import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute("pragma wal_checkpoint(TRUNCATE)")' "$1" 2>/dev/null
  cp "$1" "$2"
}

# gpu_tests: every GPU test. The kernel's (tests/gpu) run in parallel; the workbench's run one at
# a time, because several of them compare two timings of the one GPU, which tests running beside
# them distort (one failed so at -n 6 on the H200 and passed alone).
gpu_tests() {
  local workers=$(( $(nproc) / 2 )); (( workers > 8 )) && workers=8
  local common=(-m gpu -p no:cacheprovider -p no:benchmark -q -rfEs --timeout=150
                --timeout-method=thread --durations=5)
  timeout -s INT -k 10 "${TEST_TIMEOUT:-300}" python3 -m pytest tests/gpu -n "$workers" \
    "${common[@]}" 2>&1 | grep -v "^\s*$" | tail -25
  timeout -s INT -k 10 "${TEST_TIMEOUT:-300}" python3 -m pytest tests/gpu_workbench \
    "${common[@]}" 2>&1 | grep -v "^\s*$" | grep -v "Warning\|^    \|^tests/gpu_workbench.*\]$" | tail -25
}
