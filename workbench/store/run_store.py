"""The store's writes and reads: runs, their groups, points and block maps, machines'
ceilings. Every write takes the write lock first (BEGIN IMMEDIATE); one :class:`Store` per
thread."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar, cast

import numpy as np

import workbench.store.export as export
import workbench.store.files as files
import workbench.store.locking as locking
from workbench.config import ConfigError, SweepSpec, check_label
from workbench.store.errors import RunNotFound, StoreError, StoreWriteFailed
from workbench.store.opening import OpenedStore
from workbench.store.owners import hostname, owner_alive, process_start
from workbench.store.records import (
    INTERRUPTED_ERROR,
    STATUSES,
    PointRecord,
    RunRecord,
    batch_columns,
    utc_now,
)

T = TypeVar("T")
# A run's machine as ``GPU on host``, in SQL (History's machine filter).
MACHINE_NAME_SQL = (
    "(COALESCE(NULLIF(json_extract(machine, '$.gpu_name'), ''), 'CPU') || ' on ' || "
    "COALESCE(NULLIF(json_extract(machine, '$.hostname'), ''), '?'))"
)


def finite_or_none(value: float) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


class Store(OpenedStore):
    """The run database: what :class:`~workbench.store.opening.OpenedStore` opened (its
    ``read_only`` and ``upgrade`` modes are told there), with its writes, reads and export."""

    # writing ---------------------------------------------------------------------------------

    def _write(self, action: Callable[[], T], *, patience_s: float = 0.0) -> T:
        if self.read_only:
            raise StoreError(self.notice or f"{self.path} is open read-only")

        try:
            return self._retry(
                lambda: locking.write_transaction(self.db.conn, action), patience_s=patience_s
            )
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "readonly" in str(exc).lower():
                raise StoreError(f"{self.path} is read-only: {exc}") from exc
            raise StoreWriteFailed(f"writing to {self.path} failed: {exc}") from exc

    def create_group(self, kind: str, label: str, spec: dict[str, Any] | None = None) -> int:
        check_label(label)

        def insert() -> int:
            table = self.db.table("groups")
            table.insert(
                {
                    "kind": kind,
                    "label": label,
                    "created_at": utc_now(),
                    "spec": json.dumps(spec or {}),
                    "uuid": str(uuid.uuid4()),
                }
            )
            return int(cast(int, table.last_pk))  # insert() has just set it

        return self._write(insert)

    def create_run(
        self,
        spec: SweepSpec,
        machine: dict[str, Any],
        *,
        group_id: int | None = None,
        step: str | None = None,
    ) -> int:
        owner = {
            **machine,
            "pid": os.getpid(),
            "pid_host": hostname(),
            "pid_started": process_start(os.getpid()),
        }

        def insert() -> int:
            table = self.db.table("runs")
            table.insert(
                {
                    "label": spec.label,
                    "status": "running",
                    "backend": spec.backend,
                    "problem": json.dumps(spec.problems()[0].to_dict()),
                    "config": json.dumps(spec.config.to_dict()),
                    "seq_lens": json.dumps(list(spec.seq_lens)),
                    "machine": json.dumps(owner, default=str),
                    "created_at": utc_now(),
                    "group_id": group_id,
                    "step": step,
                    "axis": spec.axis,
                    "uuid": str(uuid.uuid4()),
                }
            )
            return int(cast(int, table.last_pk))  # insert() has just set it

        return self._write(insert)

    def add_point(
        self, run_id: int, result: Any, *, patient: bool = False, seq_len: int | None = None
    ) -> PointRecord:
        """Store one measured point (a :class:`~workbench.backends.base.PointResult`) at
        ``seq_len`` on its run's axis (default its q_len: N); ``patient``: wait up to
        FINAL_WRITE_PATIENCE_S for a lock (the run's last point)."""
        counts = result.block_counts()
        timing = result.timing
        row = {
            "run_id": run_id,
            "seq_len": result.problem.q_len if seq_len is None else seq_len,
            "q_len": result.problem.q_len,
            "k_len": result.problem.k_len,
            "latency_ms": timing.median_ms,
            "latency_p20_ms": timing.p20_ms,
            "latency_p80_ms": timing.p80_ms,
            "latency_min_ms": timing.min_ms,
            "samples": timing.count,
            "tflops": result.tflops,
            "compile_s": result.compile_s,
            "max_abs_err": finite_or_none(result.accuracy.max_abs_err),
            "rel_err": finite_or_none(result.accuracy.rel_err),
            "blocks_computed": counts["computed"],
            "blocks_masked": counts["masked"],
            "blocks_skipped": counts["skipped"],
            "peak_mem_bytes": result.peak_mem_bytes,
            "created_at": utc_now(),
            "samples_ms": json.dumps([round(s, 6) for s in timing.samples_ms]),
            "extra": json.dumps(result.extra, default=str),
            "plan": None if result.plan is None else json.dumps(result.plan),
        }
        problem = result.problem
        if problem.lengths is not None:  # a ragged batch: its lengths, hash, cache and pages
            batch = batch_columns(problem.lengths, problem.kv_cache, problem.page_size)
            row.update(batch, lengths=json.dumps(batch["lengths"]))
        grid = np.ascontiguousarray(result.block_map, dtype=np.int8)

        def insert() -> None:
            points = self.db.table("points")
            points.insert(row)
            self.db.table("block_maps").insert(
                {
                    "point_id": points.last_pk,
                    "rows": grid.shape[0],
                    "cols": grid.shape[1],
                    "data": grid.tobytes(),
                }
            )

        self._write(insert, patience_s=locking.FINAL_WRITE_PATIENCE_S if patient else 0.0)
        return PointRecord.from_row(row)

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        # Patient: a run left 'running' would later read "interrupted", its reason lost.
        self._write(
            lambda: self.db.table("runs").update(
                run_id, {"status": status, "error": error, "finished_at": utc_now()}
            ),
            patience_s=locking.FINAL_WRITE_PATIENCE_S,
        )

    def relabel(self, run_id: int, label: str) -> None:
        try:
            check_label(label)
        except ConfigError as exc:
            raise StoreError(f"cannot relabel run {run_id}: {exc}") from exc
        self.run(run_id)
        self._write(lambda: self.db.table("runs").update(run_id, {"label": label}))

    def delete_runs(self, run_ids: Iterable[int]) -> int:
        ids = [int(i) for i in run_ids]
        for run_id in ids:
            self.run(run_id)

        def delete() -> None:
            marks = ",".join("?" * len(ids))
            self.db.execute(
                f"DELETE FROM block_maps WHERE point_id IN "
                f"(SELECT id FROM points WHERE run_id IN ({marks}))",
                ids,
            )
            self.db.execute(f"DELETE FROM points WHERE run_id IN ({marks})", ids)
            self.db.execute(f"DELETE FROM runs WHERE id IN ({marks})", ids)

        if ids:
            self._write(delete)
        return len(ids)

    # reading ---------------------------------------------------------------------------------

    def _record(self, row: dict[str, Any]) -> RunRecord:
        """A run as the user should see it: one a read-only store found 'running' with its
        process gone reads failed ("interrupted"), as a writer would have stored it."""
        record = RunRecord.from_row(row)
        if self.read_only and record.status == "running" and not owner_alive(record.machine):
            record = dataclasses.replace(
                record, status="failed", error=INTERRUPTED_ERROR, finished_at=None
            )
        return record

    def _search_clause(
        self, search: str | None, machine: str | None = None
    ) -> tuple[str, list[Any]]:
        if machine:
            where, params = self._search_clause(search)
            joined = f"{where} AND" if where else " WHERE"
            return f"{joined} {MACHINE_NAME_SQL} = ?", [*params, machine]
        if not search:
            return "", []
        # % and _ in the search are the user's characters, not LIKE's wildcards.
        escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        like = f"%{escaped}%"
        return (
            " WHERE (label LIKE ? ESCAPE '\\' OR backend LIKE ? ESCAPE '\\' "
            "OR status LIKE ? ESCAPE '\\' OR config LIKE ? ESCAPE '\\' "
            "OR machine LIKE ? ESCAPE '\\' OR CAST(id AS TEXT) = ?)",
            [like, like, like, like, like, search],
        )

    def machines(self) -> list[str]:
        """Every machine the runs come from, as ``GPU on host`` (``CPU on host`` without a
        GPU), sorted: what History filters by."""
        rows = self.db.query(f"SELECT DISTINCT {MACHINE_NAME_SQL} AS name FROM runs")
        return sorted(row["name"] for row in rows)

    def runs(
        self,
        search: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        machine: str | None = None,
    ) -> list[RunRecord]:
        """Newest first by creation time (an imported run keeps its own, and its id is newer
        than its time), the later id first within a second; ``machine`` (a name from
        :meth:`machines`) keeps that machine's."""
        where, params = self._search_clause(search, machine)
        # created_at is UTC ISO 8601 to the second everywhere (utc_now): text order is time order.
        sql = f"SELECT * FROM runs{where} ORDER BY created_at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params += [limit, offset]
        return [self._record(row) for row in self.db.query(sql, params)]

    def count_runs(self, search: str | None = None, machine: str | None = None) -> int:
        where, params = self._search_clause(search, machine)
        return next(self.db.query(f"SELECT COUNT(*) AS n FROM runs{where}", params))["n"]

    def run(self, run_id: int) -> RunRecord:
        rows = list(self.db.query("SELECT * FROM runs WHERE id = ?", [run_id]))
        if not rows:
            raise RunNotFound(run_id)
        return self._record(rows[0])

    def group_runs(self, group_id: int) -> list[RunRecord]:
        rows = self.db.query("SELECT * FROM runs WHERE group_id = ? ORDER BY id", [group_id])
        return [self._record(row) for row in rows]

    def group(self, group_id: int) -> dict[str, Any]:
        rows = list(self.db.query("SELECT * FROM groups WHERE id = ?", [group_id]))
        if not rows:
            raise StoreError(f"group {group_id} does not exist")
        row = rows[0]
        row["spec"] = json.loads(row["spec"] or "{}")
        return row

    def groups(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Groups (of one ``kind``, e.g. 'ladder'), newest first, as :meth:`group` returns them
        plus ``runs``, how many runs they hold now."""
        where, params = (" WHERE g.kind = ?", [kind]) if kind is not None else ("", [])
        rows = self.db.query(
            "SELECT g.*, (SELECT COUNT(*) FROM runs r WHERE r.group_id = g.id) AS runs "
            f"FROM groups g{where} ORDER BY g.id DESC",
            params,
        )
        return [{**row, "spec": json.loads(row["spec"] or "{}")} for row in rows]

    def points(self, run_id: int) -> list[PointRecord]:
        rows = self.db.query("SELECT * FROM points WHERE run_id = ? ORDER BY seq_len", [run_id])
        return [PointRecord.from_row(row) for row in rows]

    def samples(self, run_id: int, seq_len: int) -> list[float]:
        rows = list(
            self.db.query(
                "SELECT samples_ms FROM points WHERE run_id = ? AND seq_len = ?", [run_id, seq_len]
            )
        )
        return json.loads(rows[0]["samples_ms"] or "[]") if rows else []

    def block_map(self, run_id: int, seq_len: int) -> np.ndarray | None:
        rows = list(
            self.db.query(
                "SELECT b.rows, b.cols, b.data FROM block_maps b JOIN points p "
                "ON p.id = b.point_id WHERE p.run_id = ? AND p.seq_len = ?",
                [run_id, seq_len],
            )
        )
        if not rows:
            return None
        row = rows[0]
        return np.frombuffer(row["data"], dtype=np.int8).reshape(row["rows"], row["cols"])

    def set_point_extra(self, run_id: int, seq_len: int, key: str, value: Any) -> None:
        """Keep one more fact with a stored point, in its extra facts under ``key`` (``ncu``:
        Nsight Compute's metrics; ``resources``: what its launch compiled to); a later value
        replaces it."""
        rows = list(
            self.db.query(
                "SELECT id, extra FROM points WHERE run_id = ? AND seq_len = ?", [run_id, seq_len]
            )
        )
        if not rows:
            raise StoreError(f"run {run_id} has no point at N={seq_len}")
        extra = json.dumps({**json.loads(rows[0]["extra"] or "{}"), key: value})
        self._write(lambda: self.db.table("points").update(rows[0]["id"], {"extra": extra}))

    def add_ceilings(self, record: dict[str, Any]) -> int:
        """Store one machine's measured ceilings
        (:meth:`workbench.analysis.roofline.Ceilings.to_dict`)."""

        def insert() -> int:
            table = self.db.table("machine_ceilings")
            table.insert(
                {
                    "gpu_name": record["gpu_name"],
                    "measured_at": record["measured_at"],
                    "record": json.dumps({k: v for k, v in record.items() if k != "id"}),
                }
            )
            return int(cast(int, table.last_pk))  # insert() has just set it

        return self._write(insert)

    def ceilings(self) -> list[dict[str, Any]]:
        """Every stored ceilings record, newest measurement first (an imported record may be
        older than one measured here; none in a database from before they were kept, which a
        reading command does not migrate)."""
        if "machine_ceilings" not in self.db.table_names():
            return []
        rows = self.db.query(
            "SELECT id, record FROM machine_ceilings ORDER BY measured_at DESC, id DESC"
        )
        return [{**json.loads(row["record"]), "id": row["id"]} for row in rows]

    # export ----------------------------------------------------------------------------------

    def export_rows(self, run_ids: list[int] | None = None) -> Iterator[dict[str, Any]]:
        """One flat row per point, with the run's metadata as columns."""
        runs = [self.run(i) for i in run_ids] if run_ids else list(reversed(self.runs()))
        yield from export.point_rows(runs, self.points, self.ceilings())

    def export_csv(self, path: str | os.PathLike[str], run_ids: list[int] | None = None) -> int:
        """Write the rows to ``path`` (see :mod:`workbench.safe_write`: atomic for a file, in
        place for a FIFO or device, never onto this database or any SQLite file); returns the
        number of rows."""
        return export.write_csv(path, list(self.export_rows(run_ids)), self.path)

    def close(self) -> None:
        if getattr(self, "_closed", False):
            return
        self._closed = True
        self.db.conn.close()
        files.release(self.path)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
