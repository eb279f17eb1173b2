"""What the store hands out: a run (:class:`RunRecord`) and its measured points
(:class:`PointRecord`), read from their rows and written out as plain dicts."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from workbench.batch_lengths import lengths_hash
from workbench.config import AXES, SEQ_LEN_AXIS, KernelConfig, Problem
from workbench.measure.timing import facts_from_stored_samples

STATUSES = ("running", "complete", "failed", "cancelled")
INTERRUPTED_ERROR = (
    "interrupted: the process running it stopped before it finished; the points measured "
    "before that are kept"
)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunRecord:
    id: int
    label: str
    status: str
    backend: str
    problem: Problem
    config: KernelConfig
    seq_lens: tuple[int, ...]
    machine: dict[str, Any]
    created_at: str
    finished_at: str | None
    error: str | None
    group_id: int | None
    step: str | None
    axis: str = SEQ_LEN_AXIS  # what seq_lens and each point's seq_len are: N or k_len

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRecord:
        axis = row.get("axis") or SEQ_LEN_AXIS
        return cls(
            id=row["id"],
            label=row["label"] or "",
            status=row["status"],
            backend=row["backend"],
            problem=Problem.from_dict(json.loads(row["problem"])),
            config=KernelConfig.as_stored(json.loads(row["config"])),
            seq_lens=tuple(json.loads(row["seq_lens"])),
            machine=json.loads(row["machine"] or "{}"),
            created_at=row["created_at"],
            finished_at=row["finished_at"],
            error=row["error"],
            group_id=row.get("group_id"),
            step=row.get("step"),
            axis=axis if axis in AXES else SEQ_LEN_AXIS,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "status": self.status,
            "backend": self.backend,
            "problem": self.problem.to_dict(),
            "config": self.config.to_dict(),
            "seq_lens": list(self.seq_lens),
            "machine": self.machine,
            "created_at": self.created_at,
            "finished_at": self.finished_at,
            "error": self.error,
            "group_id": self.group_id,
            "step": self.step,
            "axis": self.axis,
        }

    @property
    def own_knobs(self) -> dict[str, Any] | None:
        """A plugin's own knob values as its run stored them (None for other backends); in an
        autotuned run the knobs its tuner chose at each point read ``tuned``."""
        own = self.machine.get("plugin_knobs")
        if not isinstance(own, dict) or not own:
            return None
        tuned = (self.machine.get("plugin_tunable") or ()) if self.config.tuned else ()
        return {name: ("tuned" if name in tuned else value) for name, value in own.items()}

    def point_problem(self, point: PointRecord) -> Problem:
        """The problem one of its points solved (its own q_len, k_len and offset; a ragged
        batch's own lengths)."""
        if point.lengths is not None and self.problem.lengths is not None:
            return dataclasses.replace(self.problem, lengths=point.lengths)
        return dataclasses.replace(
            self.problem,
            q_len=point.q_len,
            k_len=point.k_len,
            input_pos=max(point.k_len - point.q_len, 0),
        )


POINT_FIELDS = (
    "seq_len",
    "q_len",
    "k_len",
    "latency_ms",
    "latency_p20_ms",
    "latency_p80_ms",
    "latency_min_ms",
    "samples",
    "tflops",
    "compile_s",
    "max_abs_err",
    "rel_err",
    "blocks_computed",
    "blocks_masked",
    "blocks_skipped",
    "peak_mem_bytes",
)


@dataclass(frozen=True)
class PointRecord:
    run_id: int
    seq_len: int
    q_len: int
    k_len: int
    latency_ms: float
    latency_p20_ms: float
    latency_p80_ms: float
    latency_min_ms: float
    samples: int
    tflops: float
    compile_s: float
    max_abs_err: float | None
    rel_err: float | None
    blocks_computed: int
    blocks_masked: int
    blocks_skipped: int
    peak_mem_bytes: int | None
    extra: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None  # the launch plan it ran (kernels.cutile.plan), if any
    # A ragged batch's point (schema 7; None before and for uniform batches).
    lengths: tuple[int, ...] | None = None
    kv_cache: str | None = None
    page_size: int | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PointRecord:
        values = {name: row[name] for name in POINT_FIELDS}
        extra = json.loads(row.get("extra") or "{}")
        if "samples_ms" in row and "turns" not in extra:  # stored before turns were recorded
            extra = facts_from_stored_samples(extra, json.loads(row["samples_ms"] or "[]"))
        plan = json.loads(row["plan"]) if row.get("plan") else None
        stored = json.loads(row.get("lengths") or "null")  # an older database has no column
        lengths = tuple(stored) if isinstance(stored, list) else None
        return cls(
            run_id=row["run_id"], extra=extra, plan=plan, **values, lengths=lengths,
            kv_cache=row.get("kv_cache"), page_size=row.get("page_size"),
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        data = {"run_id": self.run_id, **{name: getattr(self, name) for name in POINT_FIELDS}}
        data["extra"] = self.extra or {}
        data["plan"] = self.plan
        data.update(batch_columns(self.lengths, self.kv_cache, self.page_size))
        return data


def batch_columns(
    lengths: tuple[int, ...] | None, kv_cache: str | None, page_size: int | None
) -> dict[str, Any]:
    """A point's ragged-batch columns: its lengths (a list), their hash, cache and page size."""
    return {
        "lengths": list(lengths) if lengths is not None else None,
        "lengths_hash": lengths_hash(lengths) if lengths is not None else None,
        "kv_cache": kv_cache,
        "page_size": page_size,
    }
