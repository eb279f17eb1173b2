"""``show``'s table of a run's points: latency, throughput, bandwidth and block counts, with the
columns only some runs have (% of read, splits, tuned tiles, compiled resources, % of roof)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernels import knobs, schedule
from workbench.analysis.bandwidth import point_bandwidth
from workbench.analysis.compare import compiled_of, point_pct, run_ceilings
from workbench.analysis.resources import CompiledResources
from workbench.analysis.serving_blocks import point_block_counts
from workbench.analysis.tuned import tuned_labels
from workbench.cli.output import fmt
from workbench.config import AXIS_LABELS
from workbench.store import Store


def point_table(
    store: Store, run: Any, points: Sequence[Any]
) -> tuple[list[str], list[list[str]], Any]:
    """The header and rows of ``run``'s points, and the run's roofline ceilings (None where
    this machine has none)."""
    bandwidths = [point_bandwidth(run, p) for p in points]
    rows = [
        [
            str(p.seq_len),
            f"{p.latency_ms:.4f}",
            f"{p.latency_p20_ms:.4f}-{p.latency_p80_ms:.4f}",
            str(p.samples),
            f"{p.tflops:.3f}",
            fmt(bw["kv_gbs"], ".1f"),
            fmt(bw["qo_gbs"], ".2f"),
            fmt(p.rel_err, ".1e"),
            "/".join(str(n) for n in point_block_counts(run, p).values()),
            f"{p.compile_s:.2f}",
        ]
        for p, bw in zip(points, bandwidths, strict=True)
    ]
    header = [
        AXIS_LABELS[run.axis],
        "median ms",
        "p20-p80 ms",
        "n",
        "TFLOP/s",
        "K+V GB/s",
        "Q+O GB/s",
        "rel err",
        "blocks c/m/s",
        "compile s",
    ]
    if any(bw["kv_read_pct"] is not None for bw in bandwidths):
        # Where this machine's read bandwidth was measured: how close K+V runs to it.
        header.insert(7, "% of read")
        for row, bw in zip(rows, bandwidths, strict=True):
            row.insert(7, fmt(bw["kv_read_pct"], ".0f"))
    # The decode form: how many splits of the key range each point ran (auto resolves per
    # point), so the block map's colours can be read against it.
    splits = [schedule.recorded_splits(p.extra or {}) for p in points]
    if any(s is not None for s in splits):
        header.append("splits")
        for row, count in zip(rows, splits, strict=True):
            row.append("-" if count is None else str(count))
    # Where the tuner chose, the config line above is only nominal: say what each point
    # launched.
    tuned = tuned_labels(run.config.tuned, points)
    if tuned:
        header.append("tuned")
        for row, p in zip(rows, points, strict=True):
            row.append(tuned.get(p.seq_len, "-"))
    compiled = [compiled_of(p) for p in points]
    if any(compiled):
        header.append("compiled")
        for row, found in zip(rows, compiled, strict=True):
            row.append(CompiledResources.from_dict(found).short() if found else "-")
    ceilings = run_ceilings(store, [run])[run.id]
    if ceilings is not None:
        header.append("% roof")
        for row, p in zip(rows, points, strict=True):
            row.append(fmt(point_pct(run, p, ceilings), ".0f"))
    return header, rows, ceilings


def compile_summary(points: Sequence[Any]) -> str:
    """Compile time of a run in all, and what else was kept apart from it."""
    total = sum(p.compile_s for p in points)
    tune = sum((p.extra or {}).get("tune_s", 0.0) for p in points)
    maps = sum((p.extra or {}).get("block_map_s", 0.0) for p in points)
    timers = sorted({(p.extra or {}).get("timer", "?") for p in points})
    extra = f", {knobs.TUNER.word} {tune:.1f} s" if tune else ""
    extra += f", block maps {maps:.1f} s" if maps else ""
    return f"{total:.1f} s in all ({len(points)} point(s){extra}); timer {', '.join(timers)}"
