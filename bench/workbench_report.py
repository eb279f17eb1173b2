"""Turn a workbench CSV export of a `--backends` peer sweep into a markdown ratio table.

    python bench/workbench_report.py bench/results/h200-workbench-export.csv

Per mask and sequence length: each backend's TFLOP/s, and cuTile's ratio to cuDNN and to
FA2 (latency of the peer over latency of cuTile; > 1 means cuTile is faster).
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="a file written by `fmha-workbench export --csv`")
    args = parser.parse_args()
    with open(args.csv, newline="", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["group_id"]]
    # (mask, N) -> backend -> row
    table: dict[tuple[str, int], dict[str, dict[str, str]]] = defaultdict(dict)
    for row in rows:
        table[(row["config_mask"], int(row["seq_len"]))][row["backend"]] = row
    first = rows[0]
    print(
        f"{first['gpu']}, {first['dtype']}, B={first['batch']}, H={first['heads']}, "
        f"D={first['head_dim']}; TFLOP/s = 4·B·H·N²·D / median time, halved for causal.\n"
    )
    print("| mask | N | cuTile | cuDNN | FA2 | naive | cuTile/cuDNN | cuTile/FA2 | cuTile config |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (mask, n), by_backend in sorted(table.items()):
        ours = by_backend.get("cutile")
        tuned = "autotuned" if ours and ours["config_autotune"] == "True" else ""
        cells = [mask, str(n)]
        cells += [_tflops(by_backend.get(name)) for name in PEERS]
        cells += [_ratio(ours, by_backend.get(name)) for name in ("torch-cudnn", "torch-flash")]
        print("| " + " | ".join([*cells, tuned]) + " |")


PEERS = ("cutile", "torch-cudnn", "torch-flash", "naive")


def _tflops(row: dict[str, str] | None) -> str:
    return f"{float(row['tflops']):.0f}" if row else "–"


def _ratio(ours: dict[str, str] | None, peer: dict[str, str] | None) -> str:
    if not (ours and peer):
        return "–"
    return f"{float(peer['latency_ms']) / float(ours['latency_ms']):.2f}×"


if __name__ == "__main__":
    main()
