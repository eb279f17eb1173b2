"""``compare``'s table of runs side by side per length (latency, Δ %, speed-up, with GB/s for
decode, % of roof and compiled resources where the runs have them), and the Nsight Compute
metrics of the lengths two or more of them profiled."""

from __future__ import annotations

from typing import Any

from workbench.analysis.compare import format_delta, format_speedup
from workbench.analysis.resources import CompiledResources
from workbench.cli.output import fmt, table
from workbench.config import AXIS_LABELS, K_LEN_AXIS
from workbench.store import Store


def compare_table(data: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The header and rows of :func:`~workbench.analysis.compare.compare_runs`'s ``data``."""
    # A decode comparison is about memory: each run's GB/s of K+V beside its latency.
    decode = data["axis"] == K_LEN_AXIS
    header = [AXIS_LABELS.get(data["axis"], "length")]

    def has(key: str, run_id: int) -> bool:
        return any(e["runs"][str(run_id)][key] is not None for e in data["points"])

    for r in data["runs"]:
        header.append(f"#{r['id']} ms")
        if decode:
            header.append(f"#{r['id']} GB/s")
        if r["id"] != data["base"]:
            header += ["Δ %", f"#{r['id']} vs #{data['base']}"]
        if has("pct_of_roofline", r["id"]):
            header.append(f"#{r['id']} % roof")
        if has("compiled", r["id"]):
            header.append(f"#{r['id']} compiled")
    rows = []
    for entry in data["points"]:
        row = [str(entry["seq_len"])]
        for r in data["runs"]:
            cell = entry["runs"][str(r["id"])]
            row.append(fmt(cell["latency_ms"], ".4f"))
            if decode:
                row.append(fmt(cell["kv_gbs"], ".1f"))
            if r["id"] != data["base"]:
                # The window's Compare tab prints the same two numbers the same way.
                row.append(format_delta(cell["delta_pct"]))
                row.append(format_speedup(cell["speedup_vs_base"], cell["significant"]))
            if has("pct_of_roofline", r["id"]):
                row.append(fmt(cell["pct_of_roofline"], ".0f"))
            if has("compiled", r["id"]):
                compiled = cell["compiled"]
                row.append(CompiledResources.from_dict(compiled).short() if compiled else "-")
        rows.append(row)
    return header, rows


def print_profiles(store: Store, run_ids: list[int]) -> None:
    """The Nsight Compute metrics of every length that two or more of the runs profiled,
    side by side (`fmha-workbench profile`)."""
    from workbench.reports.ncu import compare_rows

    by_run = {
        run_id: {p.seq_len: (p.extra or {}).get("ncu") for p in store.points(run_id)}
        for run_id in run_ids
    }
    lengths = sorted({n for points in by_run.values() for n, prof in points.items() if prof})
    for n in lengths:
        profiles = [by_run[run_id].get(n) for run_id in run_ids]
        if sum(1 for p in profiles if p) < 2:
            continue
        axes = {store.run(run_id).axis for run_id in run_ids}
        length = AXIS_LABELS.get(axes.pop(), "N") if len(axes) == 1 else "length"
        print(f"\nNsight Compute at {length}={n}:")
        header = ["metric", *[f"#{run_id}" for run_id in run_ids]]
        print(table(compare_rows(profiles), header))
