"""Every run, its points and block maps, in SQLite through sqlite-utils.

Guarantees:

* Each point is committed with its block map in one transaction the moment it is measured, so a
  crash or a ``kill -9`` keeps everything measured before it and no point without its map; a run
  left 'running' by a dead process is shown as failed ("interrupted") when the database is next
  opened (a live process that reused the PID is told apart by its start time). Every write takes
  the write lock first (BEGIN IMMEDIATE), so writers queue for it.
* WAL journal and foreign keys on every writing connection; the schema version is
  ``PRAGMA user_version`` and migrations are applied in order, each in a transaction, so
  re-opening is always safe.
* A file that is not a run database (not SQLite, another application's SQLite file, a folder, a
  device, a FIFO) is refused untouched, writing or not. A store opened ``read_only`` never
  creates, moves, migrates or changes its file.
* A damaged run database is set aside under a timestamped name by a writing store only, and a
  fresh database is used; ``Store.notice`` says where it went. A file from a newer schema opens
  read-only with a notice, or is refused when this version cannot read its tables.
* A database locked by another writer is retried with backoff before a clear error
  (:class:`StoreLocked`); a run's end is retried for much longer, so its reason is not lost.

One :class:`Store` per thread: SQLite connections must not cross threads.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import quote

import numpy as np
import sqlite_utils

from kernels.knobs import TUNABLE
from workbench import damage, store_open
from workbench.bandwidth import point_gbs, read_fraction_pct
from workbench.config import (
    AXES,
    SEQ_LEN_AXIS,
    ConfigError,
    KernelConfig,
    Problem,
    SweepSpec,
    check_label,
)
from workbench.disk_room import WRITE_FAILURES
from workbench.roofline import ROOFLINE_COLUMNS, Ceilings, ceilings_for, point_columns
from workbench.run_database import foreign_reason
from workbench.safe_write import SQLITE_MAGIC, UnsafeTarget, write_bytes_safely
from workbench.timing import facts_from_stored_samples

APP_NAME = "fmha-workbench"
STATUSES = ("running", "complete", "failed", "cancelled")
INTERRUPTED_ERROR = (
    "interrupted: the process running it stopped before it finished; the points measured "
    "before that are kept"
)
# Backoff between attempts: 0.05 s doubling, about 3 s in all; each attempt also waits up to
# busy_timeout_s inside SQLite, so with the default 2 s a held lock is given up after about 17 s.
LOCK_RETRIES = 6
# The window opens a store in a worker thread while a lock is waited out, then uses it in its
# own (one thread at a time): workbench.gui.lock_wait.
ANY_THREAD: dict[str, Any] = {"check_same_thread": False}
BUSY_TIMEOUT_S = 2.0
# How long the last write of a run (its end, and a point measured when the lock was lost) keeps
# trying: a run left 'running' would lose the reason it ended.
FINAL_WRITE_PATIENCE_S = 120.0
T = TypeVar("T")
# A cuTile point's compiled resources (workbench.resources.CompiledResources), as CSV columns.
COMPILED_COLUMNS = (
    "arch", "registers", "spill_bytes", "shared_bytes", "ctas_per_sm", "issue_share", "mufu_share",
    "kv_share", "error",
)  # fmt: skip


class StoreError(RuntimeError):
    """A database problem the user can act on; the message says what to do."""


class StoreLocked(StoreError):
    """Another writer held the database's lock for longer than the retries wait."""


class StoreWriteFailed(StoreError):
    """A write the disk refused (full, an I/O error): not bad input, the CLI's exit 1."""


class RunNotFound(StoreError):
    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id} does not exist (see `fmha-workbench runs`)")


def env_db_path() -> Path | None:
    """``$FMHA_WORKBENCH_DB`` when set: it chooses the database for the CLI and the window."""
    override = os.environ.get("FMHA_WORKBENCH_DB")
    return Path(override).expanduser() if override else None


def data_dir_db_path() -> Path:
    """runs.db in the user's data directory, the place a first start creates."""
    from platformdirs import user_data_dir

    return Path(user_data_dir(APP_NAME, appauthor=False)) / "runs.db"


def default_db_path() -> Path:
    """``$FMHA_WORKBENCH_DB``, else runs.db in the user's data directory."""
    return env_db_path() or data_dir_db_path()


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# --- schema -----------------------------------------------------------------------------------


def _migration_1(db: sqlite_utils.Database) -> None:
    """Runs and their points."""
    db.table("runs").create(
        {
            "id": int,
            "label": str,
            "status": str,
            "backend": str,
            "problem": str,  # JSON of Problem at the first length
            "config": str,  # JSON of KernelConfig
            "seq_lens": str,  # JSON list
            "machine": str,  # JSON
            "created_at": str,
            "finished_at": str,
            "error": str,
        },
        pk="id",
        not_null={"status", "backend", "problem", "config", "seq_lens", "created_at"},
    )
    db.table("points").create(
        {
            "id": int,
            "run_id": int,
            "seq_len": int,
            "q_len": int,
            "k_len": int,
            "latency_ms": float,
            "latency_p20_ms": float,
            "latency_p80_ms": float,
            "latency_min_ms": float,
            "samples": int,
            "tflops": float,
            "compile_s": float,
            "max_abs_err": float,
            "rel_err": float,
            "blocks_computed": int,
            "blocks_masked": int,
            "blocks_skipped": int,
            "peak_mem_bytes": int,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("points").create_index(["run_id", "seq_len"], unique=True)


def _migration_2(db: sqlite_utils.Database) -> None:
    """Groups of runs (several backends on the same inputs, ladders), raw samples, block maps."""
    db.table("groups").create(
        {"id": int, "kind": str, "label": str, "created_at": str, "spec": str}, pk="id"
    )
    db.table("runs").add_column("group_id", int, fk="groups", fk_col="id")
    db.table("runs").add_column("step", str)
    db.table("points").add_column("samples_ms", str)  # JSON list, the raw timings
    db.table("points").add_column("extra", str)  # JSON, backend-specific facts (autotuned...)
    db.table("block_maps").create(
        {"point_id": int, "rows": int, "cols": int, "data": bytes},
        pk="point_id",
        foreign_keys=[("point_id", "points", "id")],
    )
    db.table("runs").create_index(["created_at"])
    db.table("runs").create_index(["group_id"])


# A run's machine as ``GPU on host``, in SQL (History's machine filter).
MACHINE_NAME_SQL = (
    "(COALESCE(NULLIF(json_extract(machine, '$.gpu_name'), ''), 'CPU') || ' on ' || "
    "COALESCE(NULLIF(json_extract(machine, '$.hostname'), ''), '?'))"
)

# What a stored run's or group's identity is derived from when it was stored without one: the
# same in every copy of the database, so importing a copy twice finds its runs the second time.
RUN_IDENTITY_FIELDS = (
    "id", "created_at", "backend", "problem", "config", "seq_lens", "machine", "group_id", "step",
)  # fmt: skip
GROUP_IDENTITY_FIELDS = ("id", "kind", "created_at", "spec")
_IDENTITY_NAMESPACE = uuid.UUID("6f0c6a4e-39a1-4c55-9b8e-1d2f0e0b3939")


def content_uuid(kind: str, row: dict[str, Any]) -> str:
    """A run's (``kind`` 'run') or group's identity from what it stored, for rows stored
    before identities were (:func:`_migration_3`, and ``import`` reading an older file)."""
    fields = RUN_IDENTITY_FIELDS if kind == "run" else GROUP_IDENTITY_FIELDS
    content = json.dumps([kind, *(row.get(name) for name in fields)], default=str)
    return str(uuid.uuid5(_IDENTITY_NAMESPACE, content))


def _migration_3(db: sqlite_utils.Database) -> None:
    """A stable identity (uuid) per run and per group, which ``import`` matches on: new ones
    get a random one, those stored before one derived from their content."""
    for table, kind in (("runs", "run"), ("groups", "group")):
        db.table(table).add_column("uuid", str)
        rows = list(db.query(f"SELECT * FROM {table}"))
        db.conn.executemany(
            f"UPDATE {table} SET uuid = ? WHERE id = ?",
            [(content_uuid(kind, row), row["id"]) for row in rows],
        )
        db.table(table).create_index(["uuid"])


def _migration_4(db: sqlite_utils.Database) -> None:
    """Which axis a run swept: "seq_len" (N = q_len) or "k_len" (keys at a fixed q_len, decode).
    Runs stored before swept N, and say so."""
    db.table("runs").add_column("axis", str)
    db.execute("UPDATE runs SET axis = ?", [SEQ_LEN_AXIS])


def _migration_5(db: sqlite_utils.Database) -> None:
    """Each machine's measured ceilings (workbench.roofline.Ceilings as JSON), for the
    roofline; a re-measure adds a record, the newest of a GPU is the one used."""
    db.table("machine_ceilings").create(
        {"id": int, "gpu_name": str, "measured_at": str, "record": str},
        pk="id",
        not_null={"gpu_name", "measured_at", "record"},
    )
    db.table("machine_ceilings").create_index(["gpu_name"])


MIGRATIONS: tuple[Callable[[sqlite_utils.Database], None], ...] = (
    _migration_1,
    _migration_2,
    _migration_3,
    _migration_4,
    _migration_5,
)
SCHEMA_VERSION = len(MIGRATIONS)


# --- records ----------------------------------------------------------------------------------


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

    def point_problem(self, point: PointRecord) -> Problem:
        """The problem one of its points solved (its own q_len, k_len and offset)."""
        return dataclasses.replace(
            self.problem,
            q_len=point.q_len,
            k_len=point.k_len,
            input_pos=max(point.k_len - point.q_len, 0),
        )

    def bandwidth(self, point: PointRecord) -> dict[str, float | None]:
        """GB/s of K+V and of Q+O at ``point``, and K+V in % of the machine's measured read
        bandwidth (None where it was not measured)."""
        kv_gbs, qo_gbs = point_gbs(self.point_problem(point), point.latency_ms)
        return {
            "kv_gbs": kv_gbs,
            "qo_gbs": qo_gbs,
            "kv_read_pct": read_fraction_pct(kv_gbs, self.machine),
        }


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

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PointRecord:
        values = {name: row[name] for name in POINT_FIELDS}
        extra = json.loads(row.get("extra") or "{}")
        if "samples_ms" in row and "turns" not in extra:  # stored before turns were recorded
            extra = facts_from_stored_samples(extra, json.loads(row["samples_ms"] or "[]"))
        return cls(run_id=row["run_id"], extra=extra, **values)

    def to_dict(self) -> dict[str, Any]:
        data = {"run_id": self.run_id, **{name: getattr(self, name) for name in POINT_FIELDS}}
        data["extra"] = self.extra or {}
        return data


# --- the store --------------------------------------------------------------------------------


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _write_transaction(conn: sqlite3.Connection, action: Callable[[], T]) -> T:
    """Run ``action`` as one transaction that holds the write lock from its first statement.

    BEGIN IMMEDIATE waits (busy timeout) for the lock up front. A deferred transaction that reads
    first and then writes fails at once with "database is locked" when another process committed
    in between, and no amount of waiting helps it; nested sqlite-utils writes become savepoints
    instead of committing on their own, so a crash keeps all of ``action`` or none of it.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = action()
        conn.commit()  # inside: a failed commit is rolled back too, so a retry can BEGIN again
    except BaseException:
        conn.rollback()
        raise
    return result


class Store:
    """The run database. ``notice`` carries anything the user should be told about opening it.

    ``read_only=True`` (the CLI's reading commands) never creates, moves, migrates or changes
    the file: opened ``mode=ro`` (``immutable`` where even that needs a -shm it cannot create),
    an older schema migrated in a copy in memory, a dead process's run shown failed, not stored
    so. ``upgrade=False`` (the window) opens an older schema so too, ``upgrade_from`` set.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout_s: float | None = None,
        read_only: bool = False,
        upgrade: bool = True,
    ):
        self.path = store_open.real_db_path(Path(path) if path is not None else default_db_path())
        self.notice: str | None = None
        self.read_only, self.upgrade, self.upgrade_from = read_only, upgrade, None
        self._busy_timeout_s = BUSY_TIMEOUT_S if busy_timeout_s is None else busy_timeout_s
        try:
            header = self._check_file()
            if header is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = self._open_checked(header)
        except sqlite3.OperationalError as exc:
            if _is_locked(exc):
                raise StoreLocked(
                    f"{self.path} is locked by another program; close it (or the other "
                    "fmha-workbench) and try again"
                ) from exc
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot read {self.path}: {exc}; nothing was changed") from exc
        except OSError as exc:
            raise StoreError(f"cannot open {self.path}: {exc.strerror or exc}") from exc

    # opening ---------------------------------------------------------------------------------

    def _check_file(self) -> bytes | None:
        """The file's first 100 bytes (its SQLite header; b"" for an empty file), None when
        there is no file. Whatever cannot be a run database is refused here, untouched."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            if self.read_only:
                raise StoreError(f"no run database at {self.path}") from None
            return None
        if problem := store_open.not_a_file(self.path, info):
            raise StoreError(problem)
        with open(self.path, "rb") as handle:
            header = handle.read(100)
        if header and not header.startswith(SQLITE_MAGIC):
            raise StoreError(
                f"{self.path} is not a run database (not an SQLite file); nothing was changed"
            )
        # A writer refused up front: SQLite would leave a -wal and -shm it cannot remove.
        if not self.read_only and (place := store_open.read_only_place(self.path)):
            raise StoreError(f"cannot write to {self.path}: {place}; nothing was changed")
        return header

    def _connect(self, *, read_only: bool = False, immutable: bool = False) -> sqlite3.Connection:
        if read_only:
            uri = f"file:{quote(str(self.path.absolute()))}?mode=ro" + "&immutable=1" * immutable
            conn = sqlite3.connect(uri, uri=True, timeout=self._busy_timeout_s, **ANY_THREAD)
        else:
            conn = sqlite3.connect(str(self.path), timeout=self._busy_timeout_s, **ANY_THREAD)
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _connect_read_only(self, *, brief: bool = True) -> sqlite3.Connection:
        """``mode=ro``. For a ``brief`` read (a command's), ``immutable`` where nobody has the
        file open (no -wal/-shm beside it): a read-only WAL connection would leave -wal/-shm
        files it cannot remove. Where ``mode=ro`` cannot open (a WAL file in a folder this
        user cannot write), ``immutable`` too: nobody can be writing it there."""
        if brief and not store_open.has_side_files(self.path):
            return self._connect(read_only=True, immutable=True)
        conn = self._connect(read_only=True)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            if _is_locked(exc):
                raise
            return self._connect(read_only=True, immutable=True)

    def _connect_query_only(self) -> sqlite3.Connection:
        """For a writer's store that may not write (a newer schema), kept open by the window:
        an ordinary connection that honours other writers' locks and removes its -wal/-shm on
        close, told to refuse writes; ``mode=ro`` where even that cannot open."""
        try:
            conn = self._connect()
            conn.execute("PRAGMA query_only = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as exc:
            if _is_locked(exc):
                raise
            return self._connect_read_only(brief=False)

    def _inspect(self, conn: sqlite3.Connection) -> tuple[set[str], int]:
        """The file's own tables and its schema version; DatabaseError when it is damaged."""
        if (ok := conn.execute("PRAGMA quick_check").fetchone()[0]) != "ok":
            raise sqlite3.DatabaseError(f"quick_check: {ok}")
        tables = {
            row[0]
            for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not row[0].startswith("sqlite_")
        }
        return tables, conn.execute("PRAGMA user_version").fetchone()[0]

    def _open_checked(self, header: bytes | None) -> sqlite_utils.Database:
        version, tables = 0, set[str]()
        if header:  # an existing SQLite file: look before anything is written to it
            try:
                # A writer looks through a connection that honours locks and removes the
                # -wal/-shm it makes; it writes nothing until the file is known to be its own.
                probe = self._connect_read_only() if self.read_only else self._connect()
                try:
                    tables, version = self._inspect(probe)
                finally:
                    probe.close()
            except sqlite3.DatabaseError as exc:
                # OperationalError is "cannot open / locked / I/O error", not a damaged file.
                if isinstance(exc, sqlite3.OperationalError):
                    raise
                return self._damaged(header, exc)
            self._refuse_foreign(tables, version)
        if tables and version < SCHEMA_VERSION and not (self.read_only or self.upgrade):
            store_open.defer_upgrade(self, version, SCHEMA_VERSION)  # upgraded when written
        if version > SCHEMA_VERSION:
            conn = self._connect_read_only() if self.read_only else self._connect_query_only()
            _check_readable(conn, self.path)
            self.read_only = True
            self.notice = (
                f"{self.path} was written by a newer fmha-workbench (schema {version}, this one "
                f"knows {SCHEMA_VERSION}); it is open read-only. Upgrade to add runs to it."
            )
            return sqlite_utils.Database(conn)
        if self.read_only:
            if version == SCHEMA_VERSION:
                return sqlite_utils.Database(self._connect_read_only())
            # An empty file or an older schema: read a migrated copy, leave the file alone.
            memory = sqlite3.connect(":memory:", **ANY_THREAD)
            if header:
                source = self._connect_read_only()
                source.backup(memory)
                source.close()
            db = sqlite_utils.Database(memory)
            self._migrate(db, version)
            return db
        conn = self._connect()
        db = sqlite_utils.Database(conn)
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            self._retry(db.enable_wal)
        self._migrate(db, version)
        self._mark_interrupted(db)
        return db

    def _refuse_foreign(self, tables: set[str], version: int) -> None:
        """Another application's SQLite file (or a newer workbench's this one cannot read) is
        refused by every command, before anything is written."""
        reason = foreign_reason(tables, version)  # the rule import follows too
        if reason is not None:
            raise StoreError(f"{self.path} is {reason}, not a run database; nothing was changed")

    def _damaged(self, header: bytes, exc: Exception) -> sqlite_utils.Database:
        """A file SQLite cannot read. Set aside (by a writer only) if it is a run database, by
        the schema version in its header; anything else is refused untouched."""
        header_version = int.from_bytes(header[60:64], "big") if len(header) >= 64 else 0
        problem = damage.one_line(str(exc))  # quick_check's report is lines; one is said
        if not 1 <= header_version <= SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} is not a readable run database ({problem}); nothing was changed"
            )
        if self.read_only:
            raise StoreError(damage.refusal(self.path, problem))
        moved = self._set_aside()
        self.notice = damage.set_aside_notice(self.path, moved, str(exc))
        conn = self._connect()
        db = sqlite_utils.Database(conn)
        self._retry(db.enable_wal)
        self._migrate(db, 0)
        return db

    def _set_aside(self) -> Path:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        n = 1
        while target.exists():
            target = self.path.with_name(f"{self.path.name}.damaged-{stamp}-{n}")
            n += 1
        self.path.rename(target)
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                side.rename(target.with_name(target.name + suffix))
        return target

    def _migrate(self, db: sqlite_utils.Database, version: int) -> None:
        for number in range(version + 1, SCHEMA_VERSION + 1):

            def apply(number: int = number) -> None:
                # Holding the write lock before reading the version means two processes opening
                # a fresh file at once apply each migration once, and a crash half-way leaves no
                # half schema behind.
                current = db.conn.execute("PRAGMA user_version").fetchone()[0]
                if current < number:
                    MIGRATIONS[number - 1](db)
                    db.conn.execute(f"PRAGMA user_version = {number}")

            self._retry(lambda apply=apply: _write_transaction(db.conn, apply))  # type: ignore[misc]

    def _mark_interrupted(self, db: sqlite_utils.Database) -> None:
        """Runs left 'running' by a process that no longer exists become failed."""
        rows = list(db.query("SELECT id, machine FROM runs WHERE status = 'running'"))
        dead = [r["id"] for r in rows if not _owner_alive(json.loads(r["machine"] or "{}"))]
        if not dead:
            return

        def mark() -> None:
            for run_id in dead:
                db.table("runs").update(
                    run_id,
                    {
                        "status": "failed",
                        "error": INTERRUPTED_ERROR,
                        "finished_at": utc_now(),
                    },
                )

        self._retry(lambda: _write_transaction(db.conn, mark))

    # writing ---------------------------------------------------------------------------------

    def _retry(self, action: Callable[[], T], *, patience_s: float = 0.0) -> T:
        """``action``, retried with backoff while another writer holds the lock; with
        ``patience_s``, retried (every second at most) until that long has passed."""
        delay = 0.05
        deadline = time.monotonic() + patience_s
        attempt = 0
        while True:
            try:
                return action()
            except sqlite3.OperationalError as exc:
                if not _is_locked(exc):
                    raise
                attempt += 1
                if attempt > LOCK_RETRIES and time.monotonic() >= deadline:
                    raise StoreLocked(
                        f"{self.path} stayed locked by another writer; try again when it "
                        "has finished"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _write(self, action: Callable[[], T], *, patience_s: float = 0.0) -> T:
        if self.read_only:
            raise StoreError(self.notice or f"{self.path} is open read-only")

        try:
            return self._retry(
                lambda: _write_transaction(self.db.conn, action), patience_s=patience_s
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
            "pid_host": _hostname(),
            "pid_started": _process_start(os.getpid()),
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
            "max_abs_err": _finite_or_none(result.accuracy.max_abs_err),
            "rel_err": _finite_or_none(result.accuracy.rel_err),
            "blocks_computed": counts["computed"],
            "blocks_masked": counts["masked"],
            "blocks_skipped": counts["skipped"],
            "peak_mem_bytes": result.peak_mem_bytes,
            "created_at": utc_now(),
            "samples_ms": json.dumps([round(s, 6) for s in timing.samples_ms]),
            "extra": json.dumps(result.extra, default=str),
        }
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

        self._write(insert, patience_s=FINAL_WRITE_PATIENCE_S if patient else 0.0)
        return PointRecord.from_row(row)

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        # Patient: a run left 'running' would later read "interrupted", its reason lost.
        self._write(
            lambda: self.db.table("runs").update(
                run_id, {"status": status, "error": error, "finished_at": utc_now()}
            ),
            patience_s=FINAL_WRITE_PATIENCE_S,
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
        if self.read_only and record.status == "running" and not _owner_alive(record.machine):
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
        """Store one machine's measured ceilings (:meth:`workbench.roofline.Ceilings.to_dict`)."""

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
        """Every stored ceilings record, newest first (none in a database from before they
        were kept, which a reading command does not migrate)."""
        if "machine_ceilings" not in self.db.table_names():
            return []
        rows = self.db.query("SELECT id, record FROM machine_ceilings ORDER BY id DESC")
        return [{**json.loads(row["record"]), "id": row["id"]} for row in rows]

    # export ----------------------------------------------------------------------------------

    def export_rows(self, run_ids: list[int] | None = None) -> Iterator[dict[str, Any]]:
        """One flat row per point, with the run's metadata as columns."""
        runs = [self.run(i) for i in run_ids] if run_ids else list(reversed(self.runs()))
        records = [Ceilings.from_dict(r) for r in self.ceilings()]
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
            for point in self.points(run.id):
                data = point.to_dict()
                data.pop("run_id")
                extra = data.pop("extra") or {}
                launch = extra.get("launch") if tuned else None
                launched = launch if isinstance(launch, dict) else {}
                compiled = extra.get("resources")
                compiled = compiled if isinstance(compiled, dict) else {}
                yield {
                    **base,
                    **data,
                    "latency_se_pct": extra.get("median_noise_pct"),
                    **{f"tuned_{name}": launched.get(name) for name in TUNABLE},
                    "axis": run.axis,
                    **run.bandwidth(point),
                    **{f"compiled_{name}": compiled.get(name) for name in COMPILED_COLUMNS},
                    **point_columns(
                        dataclasses.replace(run.problem, q_len=point.q_len, k_len=point.k_len),
                        point.tflops,
                        point.latency_ms,
                        ceilings,
                    ),
                }

    def export_csv(self, path: str | os.PathLike[str], run_ids: list[int] | None = None) -> int:
        """Write the rows to ``path`` (see :mod:`workbench.safe_write`: atomic for a file, in
        place for a FIFO or device, never onto this database or any SQLite file); returns the
        number of rows."""
        rows = list(self.export_rows(run_ids))
        data = csv_text(rows).encode("utf-8")
        try:
            write_bytes_safely(path, data, protected=[self.path])
        except UnsafeTarget as exc:
            raise StoreError(f"cannot export: {exc}") from exc
        except OSError as exc:  # a full disk is a failed write (exit 1), a bad path bad input
            failed = StoreWriteFailed if exc.errno in WRITE_FAILURES else StoreError
            raise failed(f"cannot write {path}: {exc.strerror or exc}") from exc
        return len(rows)

    def close(self) -> None:
        self.db.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    compiled_cols = [f"compiled_{name}" for name in COMPILED_COLUMNS]
    return [
        *run_cols, *config_cols, "gpu", "hostname", "git_commit", *POINT_FIELDS, "latency_se_pct",
        *tuned_cols, "axis", *BANDWIDTH_COLS, *compiled_cols, *ROOFLINE_COLUMNS,
    ]  # fmt: skip


BANDWIDTH_COLS = ("kv_gbs", "qo_gbs", "kv_read_pct")


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


def _finite_or_none(value: float) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def _hostname() -> str:
    import socket

    return socket.gethostname()


def _process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), None where unknown:
    a PID that is reused by a later process has a later start."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[19])  # field 22 of stat(5); the two before ")" are split off
    except (OSError, IndexError, ValueError):
        return None


def _owner_alive(machine: dict[str, Any]) -> bool:
    """Is the process that created a 'running' run still alive (on this host)? A live process
    with the same PID but another start time is not it: the PID was reused."""
    pid = machine.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    if machine.get("pid_host") != _hostname():
        return True  # another host's process: we cannot tell, so leave its run alone
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    except PermissionError:
        pass
    started = machine.get("pid_started")
    if isinstance(started, int):
        return _process_start(pid) in (started, None)
    return True


# What this version reads of each table; a newer schema that lacks one is refused, not crashed on.
READ_COLUMNS = {
    "runs": {"id", "label", "status", "backend", "problem", "config", "seq_lens", "machine",
             "created_at", "finished_at", "error"},
    "points": {"run_id", *POINT_FIELDS},
}  # fmt: skip


def _check_readable(conn: sqlite3.Connection, path: Path) -> None:
    for table, needed in READ_COLUMNS.items():
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        missing = sorted(needed - have)
        if missing:
            conn.close()
            raise StoreError(
                f"{path} was written by a newer fmha-workbench whose {table} table this one "
                f"cannot read (no {', '.join(missing)}); upgrade fmha-workbench to read it"
            )
