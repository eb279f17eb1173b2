"""Compare runs point by point: Δ% against a baseline, and whether it beats the runs' noise.

One convention for the window and the CLI: "speed-up ×" is the baseline's latency over the run's
(above 1: the run is faster), and Δ % is the run's latency change against the baseline (negative:
faster). Both are printed by :func:`format_speedup` / :func:`format_delta`, a speed-up within the
noise marked with "~".

A difference counts only when it is larger than its noise. Points timed in rounds record how
well their median is known (``median_noise_pct`` in their extra, from the spread of their turns'
medians, :mod:`workbench.measure.noise`): the threshold is twice the standard error of the
difference, at least RUN_TO_RUN_PCT, because runs minutes apart move by more than their own rounds
show. Points without it (CPU points of older databases, fewer than four turns; older GPU points
get it from their samples when read, :func:`workbench.measure.timing.facts_from_stored_samples`)
fall back to the half-widths of their p20–p80 bands added, at least MIN_NOISE_PCT. The GUI
colours only such differences; the CLI marks them.

Runs are compared like for like only when they solve the same problem
(:func:`problem_differences`) on the same machine (:func:`machine_differences`); both views warn
otherwise. :func:`compare_runs` is the whole comparison as data (the CLI's ``compare --json``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.analysis.bandwidth import point_bandwidth
from workbench.analysis.roofline import (
    Ceilings,
    ceilings_for,
    minimum_bytes,
    no_ceiling_reason,
    point_roofline,
)
from workbench.measure.noise import ratio_noise_pct

# The rule in words, as the window's Compare tab and the CLI's compare print it.
NOISE_RULE = (
    "twice the standard error of the two medians from their rounds, at least {run:g} % "
    "(points stored without rounds: their p20–p80 half-spreads added, at least {floor:g} %)"
)
# Runs minutes apart move by more than their own rounds show (docs/performance.md, "How far
# two measurements agree"): no smaller difference between two runs counts.
RUN_TO_RUN_PCT = 2.0
# Points without a measured noise are no surer than those with one: the same floor.
MIN_NOISE_PCT = RUN_TO_RUN_PCT


def noise_rule() -> str:
    return NOISE_RULE.format(run=RUN_TO_RUN_PCT, floor=MIN_NOISE_PCT)


@dataclass(frozen=True)
class Cell:
    """One run at one length against the baseline at that length."""

    latency_ms: float
    delta_pct: float | None  # None for the baseline itself or when the baseline lacks the length
    noise_pct: float | None
    significant: bool

    @property
    def speedup(self) -> float | None:
        """Baseline latency / this run's latency (the same number as ``delta_pct``)."""
        if self.delta_pct is None or self.delta_pct <= -100.0:
            return None
        return 100.0 / (100.0 + self.delta_pct)

    def speedup_band(self) -> tuple[float, float] | None:
        """The speed-ups within the noise of this one: the latency ratio ± ``noise_pct``, as
        speed-ups. The band holds 1 exactly when the difference is not significant."""
        if self.delta_pct is None or self.noise_pct is None:
            return None
        ratio, noise = 1.0 + self.delta_pct / 100.0, self.noise_pct / 100.0
        low = 1.0 / (ratio + noise)
        high = 1.0 / (ratio - noise) if ratio > noise else math.inf
        return low, high


def format_speedup(speedup: float | None, significant: bool) -> str:
    """``1.234×``, with `` ~`` when the difference is within the runs' noise; ``-`` for none."""
    if not speedup:
        return "-"
    return f"{speedup:.3f}×{'' if significant else ' ~'}"


def format_delta(delta_pct: float | None) -> str:
    return "-" if delta_pct is None else f"{delta_pct:+.1f} %"


def relative_spread_pct(point: Any) -> float:
    """Half the p20–p80 width as a percentage of the median."""
    if point.latency_ms <= 0:
        return 0.0
    return 50.0 * (point.latency_p80_ms - point.latency_p20_ms) / point.latency_ms


def median_noise(point: Any) -> float | None:
    """One standard error of the point's median in percent, as it was measured; None when the
    point did not record one."""
    value = (getattr(point, "extra", None) or {}).get("median_noise_pct")
    return float(value) if isinstance(value, (int, float)) else None


def noise_threshold_pct(point: Any, base: Any) -> float:
    """How large a difference between two points must be to count (the module's rule)."""
    ours, theirs = median_noise(point), median_noise(base)
    if ours is not None and theirs is not None:
        return max(2 * ratio_noise_pct(ours, theirs), RUN_TO_RUN_PCT)
    return max(relative_spread_pct(point) + relative_spread_pct(base), MIN_NOISE_PCT)


def compare_cell(point: Any, base: Any | None) -> Cell:
    if base is None or base.latency_ms <= 0:
        return Cell(point.latency_ms, None, None, False)
    delta = 100.0 * (point.latency_ms - base.latency_ms) / base.latency_ms
    noise = noise_threshold_pct(point, base)
    return Cell(point.latency_ms, delta, noise, abs(delta) > noise)


def compare_table(
    baseline_id: int, points_by_run: Mapping[int, Sequence[Any]]
) -> list[tuple[int, dict[int, Cell]]]:
    """Rows (seq_len, {run_id: Cell}) over the union of measured lengths, shortest first."""
    by_len = {rid: {p.seq_len: p for p in pts} for rid, pts in points_by_run.items()}
    lengths = sorted({n for pts in by_len.values() for n in pts})
    base = by_len.get(baseline_id, {})
    rows = []
    for n in lengths:
        cells: dict[int, Cell] = {}
        for rid, pts in by_len.items():
            if n not in pts:
                continue
            cells[rid] = (
                Cell(pts[n].latency_ms, None, None, False)
                if rid == baseline_id
                else compare_cell(pts[n], base.get(n))
            )
        rows.append((n, cells))
    return rows


# What makes two runs different problems (the kernel knobs are what a comparison is about).
PROBLEM_FIELDS = ("batch", "heads", "kv_heads", "head_dim", "value_dim", "dtype", "input_pos")
MASK_FIELDS = ("mask", "window")
# A field shown under the name the user types it by (--head-dim-v, the CSV's head_dim_v column).
SHOWN_AS = {"value_dim": "head_dim_v"}


def problem_differences(runs: Sequence[Any]) -> list[str]:
    """One phrase per field in which the runs' problems differ, e.g. ``heads: #1 2, #2 4``;
    empty when they all solve the same problem (a latency ratio then means something)."""
    differences = []
    axes = [getattr(run, "axis", "seq_len") for run in runs]
    if len(set(axes)) > 1:
        shown = ", ".join(f"#{run.id} {axis}" for run, axis in zip(runs, axes))
        differences.append(f"axis: {shown}")
    elif axes and axes[0] == "k_len":
        # A decode sweep's q_len is fixed: two of them solve the same problem only with one q_len.
        q_lens = [run.problem.q_len for run in runs]
        if len(set(q_lens)) > 1:
            shown = ", ".join(f"#{run.id} {q}" for run, q in zip(runs, q_lens))
            differences.append(f"q_len: {shown}")
    fields = [("problem", name) for name in PROBLEM_FIELDS]
    fields += [("config", name) for name in MASK_FIELDS]
    # kv_heads follows heads unless a run is grouped-query: then it is a field of its own.
    grouped = any(run.problem.kv_heads != run.problem.heads for run in runs)
    for part, name in fields:
        if name == "kv_heads" and not grouped:
            continue
        if name == "input_pos" and axes and axes[0] == "k_len":
            continue  # k_len - q_len at each point: the q_len above says it
        values = [getattr(getattr(run, part), name) for run in runs]
        if len(set(values)) > 1:
            shown = ", ".join(f"#{run.id} {value}" for run, value in zip(runs, values))
            differences.append(f"{SHOWN_AS.get(name, name)}: {shown}")
    return differences


# What else tells two machines' timings apart (an imported run's GPU may be the same model):
# (key in the machine record, how it is shown).
MACHINE_DETAILS = (
    ("driver_version", "driver {}"),
    ("max_sm_clock_mhz", "max SM clock {} MHz"),  # the clock at start moves with the load
    ("power_limit_w", "power limit {} W"),
)


def machine_name(machine: Mapping[str, Any]) -> str:
    """A run's machine as ``GPU on host`` (``CPU on host`` without a GPU), as History's
    machine filter names it (the store's MACHINE_NAME_SQL)."""
    return f"{machine.get('gpu_name') or 'CPU'} on {machine.get('hostname') or '?'}"


def machine_differences(runs: Sequence[Any]) -> list[str]:
    """``GPU on host`` for each machine the runs come from, when they come from more than one
    (or the same machine with another driver, clocks or power limit: each then says those);
    empty when they all come from one (timings from two machines do not compare)."""

    def key(run: Any) -> tuple[Any, ...]:
        m = run.machine
        where = (m.get("gpu_name") or "CPU", m.get("hostname") or "?")
        return where + tuple(str(m.get(name) or "?") for name, _ in MACHINE_DETAILS)

    machines = sorted({key(r) for r in runs})
    if len(machines) < 2:
        return []
    out = []
    for m in machines:
        # The details that tell it from another machine of the same GPU and host name.
        twins = [t for t in machines if t[:2] == m[:2]]
        varying = [i for i in range(len(MACHINE_DETAILS)) if len({t[2 + i] for t in twins}) > 1]
        detail = ", ".join(MACHINE_DETAILS[i][1].format(m[2 + i]) for i in varying)
        out.append(f"{m[0]} on {m[1]}" + (f" ({detail})" if detail else ""))
    return out


def run_name(run: Any) -> str:
    """``#id backend label``: a group's runs share their label, so the backend tells them
    apart (left out where the label already names it)."""
    label = run.label or ""
    backend = "" if run.backend in label else run.backend
    return " ".join(part for part in (f"#{run.id}", backend, label) if part)


def default_baseline(run_ids: Sequence[int]) -> int | None:
    """The baseline until the user pins one: the oldest run, the usual "before"."""
    return min(run_ids) if run_ids else None


def run_ceilings(store: Any, runs: Sequence[Any]) -> dict[int, Ceilings | None]:
    """Each run's GPU's newest measured ceilings in the store (None: none, or the CPU)."""
    records = [Ceilings.from_dict(r) for r in store.ceilings()]
    return {r.id: ceilings_for(records, str(r.machine.get("gpu_name") or "")) for r in runs}


def point_pct(run: Any, point: Any, ceilings: Ceilings | None) -> float | None:
    """The point's % of the roofline ceiling that bounds it, or None without ceilings."""
    if point is None or ceilings is None:
        return None
    problem = dataclasses.replace(run.problem, q_len=point.q_len, k_len=point.k_len)
    found = point_roofline(problem, point.tflops, point.latency_ms, ceilings)
    return found.pct_of_bound if found else None


def compiled_of(point: Any) -> dict[str, Any] | None:
    """What the point's launch compiled to (a cuTile point, :mod:`workbench.analysis.resources`)."""
    found = (getattr(point, "extra", None) or {}).get("resources")
    return found if isinstance(found, dict) else None


def compare_runs(store: Any, run_ids: list[int]) -> dict[str, Any]:
    """Per sequence length: each run's median latency and its speed-up over the first run,
    its % of the roofline (where its GPU has ceilings) and what it compiled to (cuTile)."""
    runs = [store.run(r) for r in run_ids]
    ceilings = run_ceilings(store, runs)
    points = {r.id: {p.seq_len: p for p in store.points(r.id)} for r in runs}
    seq_lens = sorted({n for per_run in points.values() for n in per_run})
    base = runs[0].id
    rows = []
    for n in seq_lens:
        entry: dict[str, Any] = {"seq_len": n, "runs": {}}
        base_point = points[base].get(n)
        for r in runs:
            p = points[r.id].get(n)
            cell = compare_cell(p, base_point) if p and r.id != base else None
            bandwidth = point_bandwidth(r, p) if p else {}
            entry["runs"][str(r.id)] = {
                "latency_ms": p.latency_ms if p else None,
                "tflops": p.tflops if p else None,
                "kv_gbs": bandwidth.get("kv_gbs"),
                "kv_read_pct": bandwidth.get("kv_read_pct"),
                # >1: this run is faster than the base run
                "speedup_vs_base": (base_point.latency_ms / p.latency_ms)
                if p and base_point
                else None,
                # the same rule as the window's compare table: a change beyond the runs' noise
                "delta_pct": cell.delta_pct if cell else None,
                "noise_pct": cell.noise_pct if cell else None,
                "significant": cell.significant if cell else False,
                "pct_of_roofline": point_pct(r, p, ceilings[r.id]),
                "compiled": compiled_of(p),
            }
        rows.append(entry)
    axes = {r.axis for r in runs}
    return {
        "base": base,
        # What the lengths are: "seq_len" (N) or "k_len" (decode); "mixed" when the runs differ.
        "axis": axes.pop() if len(axes) == 1 else "mixed",
        "differences": problem_differences(runs),
        "machines": machine_differences(runs),
        "runs": [
            {
                "id": r.id,
                "label": r.label,
                "backend": r.backend,
                "config": r.config.summary_for(r.backend, r.own_knobs),
                "machine": machine_name(r.machine),
                "roofline": ""
                if ceilings[r.id]
                else no_ceiling_reason(str(r.machine.get("gpu_name") or ""), r.backend),
            }
            for r in runs
        ],
        "points": rows,
    }


def roofline_points(store: Any, run_ids: Sequence[int]) -> dict[str, Any]:
    """What a roofline chart of these runs shows: each run's points as (intensity, TFLOP/s)
    with the config and % for a hover, and the ceilings of the first run's GPU that has any
    (with the reason when none has)."""
    runs = [store.run(r) for r in run_ids]
    ceilings = run_ceilings(store, runs)
    shown = next((c for c in ceilings.values() if c is not None), None)
    series = []
    for run in runs:
        points = []
        for p in store.points(run.id):
            problem = dataclasses.replace(run.problem, q_len=p.q_len, k_len=p.k_len)
            flops = p.tflops * 1e12 * p.latency_ms * 1e-3
            if flops <= 0:
                continue
            points.append(
                {
                    "seq_len": p.seq_len,
                    "intensity": flops / minimum_bytes(problem),
                    "tflops": p.tflops,
                    "pct_of_roofline": point_pct(run, p, ceilings[run.id]),
                    "compiled": compiled_of(p),
                }
            )
        series.append(
            {
                "run_id": run.id,
                "name": run_name(run),
                "config": run.config.summary_for(run.backend, run.own_knobs),
                "dtype": run.problem.dtype,
                "points": points,
            }
        )
    first = runs[0] if runs else None
    reason = ""
    if shown is None and first is not None:
        reason = no_ceiling_reason(str(first.machine.get("gpu_name") or ""), first.backend)
    return {"ceilings": shown.to_dict() if shown else None, "reason": reason, "runs": series}
