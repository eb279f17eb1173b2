"""The run database's schema: its tables, the migrations that build them applied in order (each
in one transaction, the version in ``PRAGMA user_version``), and what a run database is.

What a run database is, one rule for every reader: the store opening a file, ``import``
reading another one, ``export`` refusing to overwrite one. An SQLite file is a run database
when it has a schema version (``PRAGMA user_version`` 1 or more: every workbench has set one)
and the ``runs`` and ``points`` tables with the columns the first schema gave them; an SQLite
file with no tables and version 0 is empty, which a writer may start its schema in. Anything
else is another application's file, refused untouched.

The migrations and the version are read when used, so a test may add one on this module.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import sqlite_utils

from workbench.config import SEQ_LEN_AXIS
from workbench.store.errors import StoreError
from workbench.store.locking import write_transaction
from workbench.store.records import POINT_FIELDS


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
    """Each machine's measured ceilings (workbench.analysis.roofline.Ceilings as JSON), for the
    roofline; a re-measure adds a record, the newest of a GPU is the one used."""
    db.table("machine_ceilings").create(
        {"id": int, "gpu_name": str, "measured_at": str, "record": str},
        pk="id",
        not_null={"gpu_name", "measured_at", "record"},
    )
    db.table("machine_ceilings").create_index(["gpu_name"])


def _migration_6(db: sqlite_utils.Database) -> None:
    """Each point's launch plan (kernels.cutile.plan.LaunchPlan as JSON): what the kernel ran,
    every auto value resolved. Points stored before, and those of backends without one, have
    none. A file that has the column already (a copy taken back to an older version) keeps it."""
    if "plan" not in db.table("points").columns_dict:
        db.table("points").add_column("plan", str)


def _migration_7(db: sqlite_utils.Database) -> None:
    """A ragged batch's point: its lengths (a JSON list, one a sequence), their hash, its KV
    cache and page size; empty for the uniform batches stored before and since."""
    points = db.table("points")
    have = set(points.columns_dict)  # a file rebuilt from a newer one may hold them already
    for name, kind in (("lengths", str), ("lengths_hash", str), ("kv_cache", str),
                       ("page_size", int)):  # fmt: skip
        if name not in have:
            points.add_column(name, kind)


MIGRATIONS: tuple[Callable[[sqlite_utils.Database], None], ...] = (
    _migration_1,
    _migration_2,
    _migration_3,
    _migration_4,
    _migration_5,
    _migration_6,
    _migration_7,
)
SCHEMA_VERSION = len(MIGRATIONS)


def apply_migrations(
    db: sqlite_utils.Database, version: int, retry: Callable[[Callable[[], None]], None]
) -> None:
    """Bring ``db`` (at schema ``version``) to :data:`SCHEMA_VERSION`, one transaction per
    migration, each through ``retry`` (the store's wait for the write lock)."""
    for number in range(version + 1, SCHEMA_VERSION + 1):

        def apply(number: int = number) -> None:
            # Holding the write lock before reading the version means two processes opening
            # a fresh file at once apply each migration once, and a crash half-way leaves no
            # half schema behind.
            current = db.conn.execute("PRAGMA user_version").fetchone()[0]
            if current < number:
                MIGRATIONS[number - 1](db)
                db.conn.execute(f"PRAGMA user_version = {number}")

        retry(lambda apply=apply: write_transaction(db.conn, apply))  # type: ignore[misc]


# What this version reads of each table; a newer schema that lacks one is refused, not crashed on.
READ_COLUMNS = {
    "runs": {"id", "label", "status", "backend", "problem", "config", "seq_lens", "machine",
             "created_at", "finished_at", "error"},
    "points": {"run_id", *POINT_FIELDS},
}  # fmt: skip


def check_readable(conn: sqlite3.Connection, path: Path) -> None:
    for table, needed in READ_COLUMNS.items():
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        missing = sorted(needed - have)
        if missing:
            conn.close()
            raise StoreError(
                f"{path} was written by a newer fmha-workbench whose {table} table this one "
                f"cannot read (no {', '.join(missing)}); upgrade fmha-workbench to read it"
            )


# The columns every run database has had since its first schema (_migration_1's).
REQUIRED_COLUMNS: Mapping[str, frozenset[str]] = {
    "runs": frozenset({"id", "status", "backend", "problem", "config", "seq_lens", "created_at"}),
    "points": frozenset({"id", "run_id", "seq_len"}),
}


def foreign_reason(
    tables: set[str] | Mapping[str, set[str]], version: int, *, columns_known: bool = False
) -> str | None:
    """Why a file of these ``tables`` (names, or names with their columns where
    ``columns_known``) at schema ``version`` is not a run database; None when it is one, or is
    an empty SQLite file."""
    names = set(tables)
    if not names and version == 0:
        return None
    shown = ", ".join(sorted(names)[:5]) or "none"
    other = f"an SQLite database of another application (its tables: {shown})"
    if version == 0 or not set(REQUIRED_COLUMNS) <= names:
        return other
    if columns_known and isinstance(tables, Mapping):
        for table, needed in REQUIRED_COLUMNS.items():
            missing = sorted(needed - set(tables[table]))
            if missing:
                return f"{other}: its {table} table has no {', '.join(missing)} column"
    return None


def tables_and_columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Each of the file's own tables with its column names."""
    names = [
        row[0]
        for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not row[0].startswith("sqlite_")
    ]
    return {
        name: {row[0] for row in conn.execute("SELECT name FROM pragma_table_info(?)", (name,))}
        for name in names
    }
