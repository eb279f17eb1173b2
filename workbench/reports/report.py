"""Performance tables generated from stored groups: what the README and the benchmark publish.

A report reads one or more groups (each a ``--backends`` sweep: one run per backend, timed
interleaved) and lays out, per group and length, every backend's TFLOP/s and the *subject*
backend's speed-up over each peer: peer latency / subject latency, so ``1.04×`` means the
subject is 4 % faster (the same convention as ``compare`` and the window's Compare tab).
The markdown form carries one line of method (timer, order, machine) read from the runs.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

from kernels import knobs
from workbench.analysis.bandwidth import (
    READ_BANDWIDTH_KEY,
    point_bandwidth,
    read_line,
    read_line_text,
)
from workbench.analysis.resources import CompiledResources
from workbench.analysis.roofline import Ceilings, ceilings_for, no_ceiling_reason, point_roofline
from workbench.analysis.serving_blocks import ragged_method
from workbench.analysis.streaming import COLD_KV_BYTES, POOR_FIT_PCT, fit_run, wants_a_fit
from workbench.config import K_LEN_AXIS
from workbench.jobs.ladder_steps import GROUP_KIND as LADDER_GROUP_KIND
from workbench.store import PointRecord, RunRecord, Store, StoreError

TIMER_WORDS = {
    "graph": "CUDA-graph replay (triton do_bench_cudagraph's procedure)",
    "events": "CUDA events around back-to-back launches",
    "cpu": "wall clock around synchronous calls",
}


@dataclass(frozen=True)
class GroupReport:
    group_id: int
    label: str
    mask: str
    runs: tuple[RunRecord, ...]
    points: dict[str, dict[int, PointRecord]]  # backend -> seq_len -> point

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(r.backend for r in self.runs)

    @property
    def seq_lens(self) -> list[int]:
        return sorted({n for by_len in self.points.values() for n in by_len})

    @property
    def axis(self) -> str:
        """What its lengths are: "seq_len" (N) or "k_len" (a decode group)."""
        return self.runs[0].axis

    def bandwidth(self, backend: str, point: PointRecord | None) -> dict[str, float | None]:
        run = next(r for r in self.runs if r.backend == backend)
        return point_bandwidth(run, point) if point else {}


def read_group(store: Store, group_id: int) -> GroupReport:
    runs = store.group_runs(group_id)
    if not runs:
        raise StoreError(f"group {group_id} has no runs (see `fmha-workbench runs`)")
    group = store.group(group_id)
    points = {r.backend: {p.seq_len: p for p in store.points(r.id)} for r in runs}
    return GroupReport(group_id, group.get("label") or "", runs[0].config.mask, tuple(runs), points)


def speedup(subject: PointRecord | None, peer: PointRecord | None) -> float | None:
    """The subject's speed-up over the peer at one length: peer latency / subject latency."""
    if subject is None or peer is None or subject.latency_ms <= 0:
        return None
    return peer.latency_ms / subject.latency_ms


def build_report(store: Store, group_ids: list[int], subject: str | None = None) -> dict[str, Any]:
    """The report as plain data (what ``--json`` prints and :func:`markdown` lays out). Ladders
    are reported as ladders (:func:`build_ladder_report`), not as peers timed together."""
    kinds = {g: store.group(g).get("kind") for g in group_ids}
    if any(kind == LADDER_GROUP_KIND for kind in kinds.values()):
        if set(kinds.values()) != {LADDER_GROUP_KIND}:
            ladders = ", ".join(str(g) for g, k in kinds.items() if k == LADDER_GROUP_KIND)
            others = ", ".join(str(g) for g, k in kinds.items() if k != LADDER_GROUP_KIND)
            raise StoreError(
                f"report ladders on their own (ladder groups: {ladders}; other groups: {others})"
            )
        return build_ladder_report(store, group_ids)
    groups = [read_group(store, g) for g in group_ids]
    if subject is None:
        subject = "cutile" if "cutile" in groups[0].backends else groups[0].backends[0]
    for g in groups:
        if subject not in g.backends:
            raise StoreError(
                f"group {g.group_id} has no {subject!r} run (it has {', '.join(g.backends)})"
            )
    records = [Ceilings.from_dict(r) for r in store.ceilings()]
    first = groups[0].runs[0]
    gpu = str(first.machine.get("gpu_name") or "")
    ceilings = ceilings_for(records, gpu)
    rows = []
    shown = varying_fields([r.problem for g in groups for r in g.runs if r.backend == subject])
    for g in groups:
        peers = [b for b in g.backends if b != subject]
        problems = {r.backend: r.problem for r in g.runs}
        for n in g.seq_lens:
            cells = {b: g.points[b].get(n) for b in g.backends}
            bandwidth = {b: g.bandwidth(b, p) for b, p in cells.items()}
            rows.append(
                {
                    "group": g.group_id,
                    "mask": g.mask,
                    "axis": g.axis,
                    "problem": short_problem(problems[subject], shown),
                    "q_len": next((p.q_len for p in cells.values() if p), None),
                    "seq_len": n,
                    "tflops": {b: p.tflops if p else None for b, p in cells.items()},
                    # GB/s of K+V (each read once) and in % of the machine's measured read
                    # bandwidth (None where unmeasured): what a memory-bound decode is read by.
                    "kv_gbs": {b: bw.get("kv_gbs") for b, bw in bandwidth.items()},
                    "kv_read_pct": {b: bw.get("kv_read_pct") for b, bw in bandwidth.items()},
                    "latency_ms": {b: p.latency_ms if p else None for b, p in cells.items()},
                    "speedup": {b: speedup(cells[subject], cells[b]) for b in peers},
                    "pct_of_roofline": {
                        b: _pct(problems[b], p, ceilings) for b, p in cells.items()
                    },
                }
            )
    decode = all(g.axis == K_LEN_AXIS for g in groups)
    return {
        "subject": subject,
        "decode": decode,
        "streaming": streaming_fits(groups, shown) if decode else [],
        "groups": [
            {
                "id": g.group_id,
                "label": g.label,
                "mask": g.mask,
                "axis": g.axis,
                "backends": list(g.backends),
            }
            for g in groups
        ],
        "rows": rows,
        "method": method_line(groups),
        "roofline": {
            "ceilings": ceilings.to_dict() if ceilings else None,
            "reason": "" if ceilings else no_ceiling_reason(gpu, first.backend),
        },
    }


def streaming_fits(groups: list[GroupReport], shown: tuple[str, ...]) -> list[dict[str, Any]]:
    """Each decode group's backends split into a fixed cost and a streaming rate
    (:func:`workbench.analysis.streaming.fit_streaming`): ``fit`` is None, with ``reason``, where
    the group's lengths allow no fit."""
    fits = []
    for g in groups:
        for run in g.runs:
            points = list(g.points[run.backend].values())
            entry: dict[str, Any] = {
                "group": g.group_id,
                "problem": short_problem(run.problem, shown),
                "mask": g.mask,
                "q_len": points[0].q_len if points else None,
                "backend": run.backend,
                "fit": None,
                "lengths": len(points),
                # The machine's plain read as a line (fixed µs, GB/s), where it was measured.
                "read_line": read_line(run.machine),
            }
            try:
                entry["fit"] = fit_run(run, points).to_dict()
            except ValueError as exc:
                entry["reason"] = str(exc)
            fits.append(entry)
    return fits


def _pct(problem: Any, point: PointRecord | None, ceilings: Ceilings | None) -> float | None:
    """A point's % of the roofline ceiling that bounds it (None without a record)."""
    if point is None or ceilings is None:
        return None
    at_point = dataclasses.replace(problem, q_len=point.q_len, k_len=point.k_len)
    found = point_roofline(at_point, point.tflops, point.latency_ms, ceilings)
    return found.pct_of_bound if found else None


def build_ladder_report(store: Store, group_ids: list[int]) -> dict[str, Any]:
    """Each ladder's steps with TFLOP/s, × the previous step and × the baseline at every
    length, each ratio with its noise and whether it is beyond it (Compare's rule)."""
    from workbench.analysis.compare import noise_rule
    from workbench.jobs.ladder_steps import ladder_table

    ladders = []
    for group_id in group_ids:
        table = ladder_table(store, group_id)
        group = store.group(group_id)
        first = store.run(table["steps"][0]["run_id"])
        machine = first.machine
        ladders.append(
            {
                **table,
                "label": group.get("label") or "",
                "backend": first.backend,
                "problem": first.problem.summary(),
                "machine": machine.get("gpu_name") or machine.get("hostname") or "?",
            }
        )
    return {"kind": "ladder", "ladders": ladders, "noise_rule": noise_rule()}


def ladder_markdown(report: dict[str, Any]) -> str:
    """A ladder report as markdown: a table per ladder, steps down, lengths across."""
    from workbench.jobs.ladder_steps import format_ratio_mark

    lines: list[str] = []
    for ladder in report["ladders"]:
        lengths = ladder["seq_lens"]
        lines += [
            f"Ladder #{ladder['group_id']} {ladder['label']}: {ladder['backend']} on "
            f"{ladder['machine']}, {ladder['problem']}; each step one change on the previous, "
            "on the same inputs.",
            "",
            "| step | " + " | ".join(f"N = {_len(n)}" for n in lengths) + " |",
            "|" + "---|" * (len(lengths) + 1),
        ]
        for number, step in enumerate(ladder["steps"], start=1):
            cells = []
            for n in lengths:
                cell = step["cells"].get(str(n))
                if cell is None:
                    cells.append(f"– ({step['status']})")
                elif number == 1:
                    cells.append(f"{_tflops(cell['tflops'])} TFLOP/s")
                else:
                    cells.append(
                        f"{_tflops(cell['tflops'])} TFLOP/s, "
                        f"{format_ratio_mark(cell, 'vs_previous')} prev, "
                        f"{format_ratio_mark(cell, 'vs_baseline')} base"
                    )
                if cell is not None and cell.get("compiled"):
                    # what the step compiled to: a dip that spilled says so in its cell
                    cells[-1] += f", {CompiledResources.from_dict(cell['compiled']).short()}"
            lines.append(f"| {number}. {step['step']} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(
        "× prev / × base: the previous step's (the baseline's) latency over this step's "
        f"(> 1: faster); ~ marks a ratio within the noise: {report['noise_rule']}."
    )
    return "\n".join(lines) + "\n"


def short_problem(problem: Any, more: tuple[str, ...] = ()) -> str:
    """A row's problem in a few characters: batch and heads (query/KV where they differ), and
    the head dim and dtype where ``more`` names them (where they differ between rows)."""
    heads = (
        f"{problem.heads}/{problem.kv_heads}"
        if problem.kv_heads != problem.heads
        else str(problem.heads)
    )
    words = [f"B={problem.batch}", f"H={heads}"]
    if "head_dim" in more:
        words.append(dims_word(problem))
    if "dtype" in more:
        words.append(knobs.DTYPE.word(problem.dtype))
    return " ".join(words)


def _shape_words(problems: list[Any]) -> str:
    """The problem in the method line: ``bfloat16 B=1 H=32/8 D=128``, or what differs between
    rows as "as each row says" (``bfloat16 B and H as each row says D=128``)."""
    p = problems[0]
    varying = varying_fields(problems)
    if len({short_problem(q, varying) for q in problems}) == 1:
        return f"{p.dtype} {short_problem(p)} {dims_word(p)}"
    said = [
        "B",
        "H",
        *(["D"] if "head_dim" in varying else []),
        *(["dtype"] if "dtype" in varying else []),
    ]
    words = [p.dtype] if "dtype" not in varying else []
    words.append(", ".join(said[:-1]) + f" and {said[-1]} as each row says")
    if "head_dim" not in varying:
        words.append(dims_word(p))
    return " ".join(words)


def dims_word(problem: Any) -> str:
    """``D=128``, or ``D=192/128`` where V and the output have a head dim of their own."""
    value_dim = getattr(problem, "value_dim", problem.head_dim)
    return f"D={problem.head_dim}" + (f"/{value_dim}" if value_dim != problem.head_dim else "")


def varying_fields(problems: list[Any]) -> tuple[str, ...]:
    """Which of head dim and dtype differ between ``problems`` (what a row must then say)."""
    head_dims = {(p.head_dim, getattr(p, "value_dim", p.head_dim)) for p in problems}
    return (("head_dim",) if len(head_dims) > 1 else ()) + (
        ("dtype",) if len({p.dtype for p in problems}) > 1 else ()
    )


def method_line(groups: list[GroupReport]) -> str:
    """Timer, order, problem and machine, from what the runs recorded."""
    runs = [r for g in groups for r in g.runs]
    timers = sorted(
        {
            (p.extra or {}).get("timer", "?")
            for g in groups
            for by_len in g.points.values()
            for p in by_len.values()
        }
    )
    timer = "; ".join(TIMER_WORDS.get(t, t) for t in timers)
    shape = _shape_words([r.problem for r in runs])
    machine = runs[0].machine
    gpu = machine.get("gpu_name") or machine.get("hostname", "?")
    driver = machine.get("driver_version") or machine.get("driver") or "?"
    commits = sorted({r.machine.get("git_commit") or "?" for r in runs})
    commit = ("commits " if len(commits) > 1 else "commit ") + ", ".join(commits)
    samples = [pt.samples for g in groups for by_len in g.points.values() for pt in by_len.values()]
    lo, hi = min(samples), max(samples)
    counted = f"{lo}" if lo == hi else f"{lo}–{hi}"
    if all(g.axis == K_LEN_AXIS for g in groups):
        kv = (
            "B·Hkv·k_len·(D+Dv)"
            if any(r.problem.split_head_dims for r in runs)
            else "2·B·Hkv·k_len·D"
        )
        measure = f"GB/s = bytes of K and V ({kv}·itemsize, each read once) / median time"
        read = machine.get(READ_BANDWIDTH_KEY)
        if read:
            measure += f"; % of the {read:g} GB/s this machine's streaming read measured"
    else:
        flops = (
            "2·B·H·Nq·Nk·(D+Dv)"
            if any(r.problem.split_head_dims for r in runs)
            else "4·B·H·Nq·Nk·D"
        )
        measure = f"TFLOP/s = {flops} / median time (halved for causal)"
    shape, measure = ragged_method([r.problem for r in runs]) or (shape, measure)
    return (
        f"{shape}; {measure}; group{'s' if len(groups) > 1 else ''} "
        f"{', '.join(str(g.group_id) for g in groups)}: every "
        f"backend on the same inputs, timed in interleaved rounds in a balanced order; timer: "
        f"{timer}; median of {counted} samples a point; {gpu}, driver "
        f"{driver}, {commit}"
    )


def markdown(report: dict[str, Any]) -> str:
    if report.get("kind") == "ladder":
        return ladder_markdown(report)
    subject = report["subject"]
    backends: list[str] = [subject]
    for g in report["groups"]:
        backends += [b for b in g["backends"] if b not in backends]
    peers = backends[1:]
    if report.get("decode"):
        return _decode_markdown(report, backends)
    roofline = report.get("roofline") or {}
    ceilings = roofline.get("ceilings")
    several = len({row["problem"] for row in report["rows"]}) > 1
    header = ["problem"] if several else []
    header += ["mask", "N", *[f"{b} TFLOP/s" for b in backends], *[f"× {b}" for b in peers]]
    if ceilings:
        header += [f"{b} % of roofline" for b in backends]
    lines = [
        f"{subject}'s speed-up over each peer: peer latency / {subject} latency (> 1: "
        f"{subject} is faster).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in report["rows"]:
        cells = [row["problem"]] if several else []
        cells += [row["mask"], _len(row["seq_len"])]
        cells += [_tflops(row["tflops"].get(b)) for b in backends]
        cells += [_num(row["speedup"].get(b), ".2f", "×") for b in peers]
        if ceilings:
            cells += [_num(row["pct_of_roofline"].get(b), ".0f", " %") for b in backends]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for b in peers:
        ratios = [r["speedup"][b] for r in report["rows"] if r["speedup"].get(b)]
        if ratios:
            lines.append(
                f"- {subject} over {b}: {min(ratios):.2f}–{max(ratios):.2f}×, median "
                f"{statistics.median(ratios):.2f}×"
            )
    if ceilings:
        matmul = ceilings["matmul_tflops"]
        lines.append(
            f"- % of roofline: TFLOP/s over the ceiling that bounds each point, from "
            f"{ceilings['gpu_name']}'s ceilings measured {ceilings['measured_at']} (matmul "
            + ", ".join(f"{d} {v:g} TFLOP/s" for d, v in matmul.items())
            + f"; read {ceilings['read_gbs']:g} GB/s)"
        )
    elif roofline.get("reason"):
        lines.append(f"- {roofline['reason']}")
    lines += ["", f"Method: {report['method']}."]
    return "\n".join(lines) + "\n"


def _decode_markdown(report: dict[str, Any], backends: list[str]) -> str:
    """A decode report: per q_len and k_len every backend's GB/s of K+V, the subject's share of
    the machine's measured read bandwidth where it was measured, and its speed-ups."""
    subject, peers = backends[0], backends[1:]
    measured = any(r["kv_read_pct"].get(subject) is not None for r in report["rows"])
    several = len({row["problem"] for row in report["rows"]}) > 1
    header = ["problem"] if several else []
    header += ["mask", "q_len", "k_len", *[f"{b} GB/s" for b in backends]]
    header += [f"{subject} % of read"] if measured else []
    header += [f"× {b}" for b in peers]
    lines = [
        f"GB/s of K+V read per backend; {subject}'s speed-up over each peer: peer latency / "
        f"{subject} latency (> 1: {subject} is faster).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in report["rows"]:
        cells = [row["problem"]] if several else []
        cells += [row["mask"], str(row["q_len"]), _len(row["seq_len"])]
        cells += [_tflops(row["kv_gbs"].get(b)) for b in backends]
        if measured:
            cells.append(_num(row["kv_read_pct"].get(subject), ".0f", " %"))
        cells += [_num(row["speedup"].get(b), ".2f", "×") for b in peers]
        lines.append("| " + " | ".join(cells) + " |")
    lines += _streaming_markdown(report.get("streaming") or [])
    lines += ["", f"Method: {report['method']}."]
    return "\n".join(lines) + "\n"


def _streaming_markdown(fits: list[dict[str, Any]]) -> list[str]:
    """The fixed cost and streaming rate of each backend in each group, and the groups that
    allow no fit with the reason."""
    fitted = [f for f in fits if f["fit"]]
    read = any(f["fit"]["read_pct"] is not None for f in fitted)  # the read was measured
    lines = []
    if fitted:
        lines += [
            "",
            "Where the time goes: each group's latencies fitted as fixed + K+V bytes / rate "
            f"(least squares over its lengths past {COLD_KV_BYTES // 10**6} MB of K+V, twice "
            "the L2, where every call reads HBM). The rate is the steady state's read; the fixed "
            "cost is what every call pays whatever its length (launch, the first loads, tail, a "
            f"second launch). A worst residual past {POOR_FIT_PCT:g} % says the points do not "
            "lie on a line.",
            "",
            "| problem | mask | q_len | backend | fixed µs | rate GB/s | "
            + ("rate % of read | " if read else "")
            + "lengths | worst residual |",
            "|" + "---|" * (9 if read else 8),
        ]
        for f in fitted:
            fit = f["fit"]
            share = f"{_num(fit['read_pct'], '.0f', ' %')} | " if read else ""
            lines.append(
                f"| {f['problem']} | {f['mask']} | {f['q_len']} | {f['backend']} | "
                f"{fit['fixed_us']:.1f} | {fit['rate_gbs']:.0f} | {share}{fit['points']} | "
                f"{fit['worst_residual_pct']:.1f} %{' (not a line)' if fit['poor'] else ''} |"
            )
        lines += [
            f"- a plain read on this machine (`fmha-workbench bandwidth`: one launch that reads "
            f"each byte once, over 134–537 MB): {read_line_text(tuple(line))}, the least a "
            "kernel that reads these bytes pays"
            for line in dict.fromkeys(tuple(f["read_line"]) for f in fitted if f.get("read_line"))
        ]
    unfitted: dict[int, dict[str, Any]] = {}
    for f in fits:
        if not f["fit"] and wants_a_fit(f["lengths"]):
            unfitted.setdefault(f["group"], f)
    if unfitted:
        lines.append("")
        lines += [
            f"- no fit for group {g} ({f['problem']}, {f['mask']}, q_len {f['q_len']}): "
            f"{f['reason']}"
            for g, f in unfitted.items()
        ]
    return lines


def _len(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


def _tflops(value: float | None) -> str:
    """Whole TFLOP/s (or GB/s) for a GPU, three significant digits for the CPU's fractions."""
    return _num(value, ".0f" if value is not None and value >= 100 else ".3g")


def _num(value: float | None, spec: str, unit: str = "") -> str:
    return "–" if value is None else f"{format(value, spec)}{unit}"
