"""The CSV export: one flat row per point with its run's metadata, the columns in a fixed
order (new ones last, so older exports keep their places), text cells a spreadsheet would run
as formulas neutralised, written safely (never onto a database)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from kernels.cutile.plan import plan_columns
from kernels.knobs import TUNABLE
from workbench.analysis.bandwidth import point_bandwidth
from workbench.analysis.roofline import ROOFLINE_COLUMNS, Ceilings, ceilings_for, point_columns
from workbench.analysis.serving_blocks import point_block_counts
from workbench.batch_lengths import lengths_summary
from workbench.config import KernelConfig, Problem
from workbench.safe_write import UnsafeTarget, write_bytes_safely
from workbench.store.disk_room import WRITE_FAILURES
from workbench.store.errors import StoreError, StoreWriteFailed
from workbench.store.records import POINT_FIELDS, PointRecord, RunRecord

# A cuTile point's compiled resources (workbench.analysis.resources.CompiledResources), as CSV
# columns.
COMPILED_COLUMNS = (
    "arch", "registers", "spill_bytes", "shared_bytes", "ctas_per_sm", "issue_share", "mufu_share",
    "kv_share", "error",
)  # fmt: skip


def point_rows(
    runs: Iterable[RunRecord],
    points_of: Callable[[int], list[PointRecord]],
    stored_ceilings: list[dict[str, Any]],
) -> Iterator[dict[str, Any]]:
    """One flat row per point of ``runs`` (``points_of`` a run's id), with the run's metadata
    as columns; the roofline columns from the database's ``stored_ceilings``."""
    records = [Ceilings.from_dict(r) for r in stored_ceilings]
    for run in runs:
        ceilings = ceilings_for(records, str(run.machine.get("gpu_name") or ""))
        base = {
            "run_id": run.id,
            "label": run.label,
            "status": run.status,
            "backend": run.backend,
            "group_id": run.group_id,
            "step": run.step,
            "created_at": run.created_at,
            "batch": run.problem.batch,
            "heads": run.problem.heads,
            "kv_heads": run.problem.kv_heads,
            "head_dim": run.problem.head_dim,
            "dtype": run.problem.dtype,
            "input_pos": run.problem.input_pos,
            **{f"config_{k}": v for k, v in run.config.fields_for(run.backend).items()},
            "gpu": run.machine.get("gpu_name", ""),
            "hostname": run.machine.get("hostname", ""),
            "git_commit": run.machine.get("git_commit", ""),
        }
        tuned = run.config.tuned_by(run.backend)
        for point in points_of(run.id):
            data = point.to_dict()
            data.pop("run_id")
            extra = data.pop("extra") or {}
            plan = data.pop("plan")
            batch = {name: data.pop(name) for name in BATCH_COLS if name in data}
            launch = extra.get("launch") if tuned else None
            launched = launch if isinstance(launch, dict) else {}
            compiled = extra.get("resources")
            compiled = compiled if isinstance(compiled, dict) else {}
            yield {
                **base,
                **data,
                **{f"blocks_{k}": n for k, n in point_block_counts(run, point).items()},
                "latency_se_pct": extra.get("median_noise_pct"),
                **{f"tuned_{name}": launched.get(name) for name in TUNABLE},
                "axis": run.axis,
                **point_bandwidth(run, point),
                **{f"compiled_{name}": compiled.get(name) for name in COMPILED_COLUMNS},
                **point_columns(
                    dataclasses.replace(run.problem, q_len=point.q_len, k_len=point.k_len),
                    point.tflops,
                    point.latency_ms,
                    ceilings,
                ),
                "head_dim_v": run.problem.value_dim,
                **plan_columns(plan),
                **batch_cells(run.point_problem(point), batch),
                "block_map_source": extra.get("block_map_source"),
                "plugin_knobs": own_knob_cell(extra.get("plugin_knobs")),
            }


def write_csv(path: str | os.PathLike[str], rows: list[dict[str, Any]], database: Path) -> int:
    """Write ``rows`` to ``path`` (see :mod:`workbench.safe_write`: atomic for a file, in place
    for a FIFO or device, never onto ``database`` or any SQLite file); returns how many."""
    data = csv_text(rows).encode("utf-8")
    try:
        write_bytes_safely(path, data, protected=[database])
    except UnsafeTarget as exc:
        raise StoreError(f"cannot export: {exc}") from exc
    except OSError as exc:  # a full disk is a failed write (exit 1), a bad path bad input
        failed = StoreWriteFailed if exc.errno in WRITE_FAILURES else StoreError
        raise failed(f"cannot write {path}: {exc.strerror or exc}") from exc
    return len(rows)


def export_columns() -> list[str]:
    """The CSV header (also for an empty export)."""
    run_cols = [
        "run_id",
        "label",
        "status",
        "backend",
        "group_id",
        "step",
        "created_at",
        "batch",
        "heads",
        "kv_heads",
        "head_dim",
        "dtype",
        "input_pos",
    ]
    config_cols = [f"config_{name}" for name in KernelConfig().to_dict()]
    # latency_se_pct: one standard error of the median latency in %, from its rounds (empty
    # where the point was timed in fewer than four turns or stored before it was recorded).
    # tuned_*: what the tuner launched at that length (an autotuned cuTile run), else empty.
    # axis: what seq_len is, "seq_len" (N) or "k_len" (a decode sweep at a fixed q_len).
    # kv_gbs, qo_gbs: GB/s of K+V and of Q+O (each read or written once) at the median latency;
    # kv_read_pct: K+V in % of the machine's measured read bandwidth, empty where unmeasured.
    # Both come last, so the columns of older exports keep their places.
    tuned_cols = [f"tuned_{name}" for name in TUNABLE]
    # compiled_*: what the point's launch compiled to on the run's GPU (cuTile runs), else empty.
    # intensity_flop_per_byte: counted FLOPs over q, k, v and the output's bytes; the bound and
    # its % only where the database holds measured ceilings of the run's GPU.
    # head_dim_v: V's and the output's head dim (head_dim unless the run set another), last.
    # block_map_source: whose block map the point stored: "plugin" (the plugin's report),
    # "schedule" (a plugin's without one: the tile schedule's model), "kernel" (our kernel's
    # instrumented launch), "host model"; empty where the backend walks the schedule itself.
    # plugin_knobs: a plugin's own knob values at that point (an autotuned run's: its tuner's
    # choice there), as JSON; empty for other backends.
    compiled_cols = [f"compiled_{name}" for name in COMPILED_COLUMNS]
    return [
        *run_cols, *config_cols, "gpu", "hostname", "git_commit", *POINT_FIELDS, "latency_se_pct",
        *tuned_cols, "axis", *BANDWIDTH_COLS, *compiled_cols, *ROOFLINE_COLUMNS, "head_dim_v",
        *plan_columns(None), *BATCH_COLS, "block_map_source", "plugin_knobs",
    ]  # fmt: skip


BANDWIDTH_COLS = ("kv_gbs", "qo_gbs", "kv_read_pct")
# A ragged batch's point: its summary, the hash and JSON list of its lengths, its KV cache and
# page size (docs/serving.md); empty for a uniform batch.
BATCH_COLS = ("lengths_summary", "lengths_hash", "lengths", "kv_cache", "page_size")


def own_knob_cell(values: Any) -> str | None:
    """A point's own knob values as one JSON cell (None: the backend has none)."""
    return json.dumps(values, sort_keys=False) if isinstance(values, dict) and values else None


def batch_cells(problem: Problem, stored: dict[str, Any]) -> dict[str, Any]:
    """The :data:`BATCH_COLS` of a point whose problem is ``problem``, lengths as JSON."""
    if problem.lengths is None or stored.get("lengths") is None:
        return dict.fromkeys(BATCH_COLS)
    return {
        "lengths_summary": lengths_summary(problem.lengths, problem.page_size, problem.varlen),
        "lengths_hash": stored["lengths_hash"],
        "lengths": json.dumps(stored["lengths"]),
        "kv_cache": stored["kv_cache"],
        "page_size": stored["page_size"],
    }


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralised(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula, prefixed with ' (OWASP's advice);
    numbers, empty cells and other text as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(rows: list[dict[str, Any]]) -> str:
    """The export as CSV text: the header, then one line per row, text cells neutralised."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else export_columns())
    writer.writeheader()
    writer.writerows({k: neutralised(v) for k, v in row.items()} for row in rows)
    return buffer.getvalue()
