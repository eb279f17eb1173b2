"""Runs from other machines in one database: copy another run database's runs, with their
groups, points, raw samples and block maps, into the open one.

Each run and group has a stable identity (``uuid``, :func:`workbench.store.content_uuid` for
those stored before identities were), so importing the same file twice adds nothing the second
time. A run keeps its machine record (GPU, driver, clocks, host), which History filters by and
Compare warns on, and its GPU's measured ceilings come along (the roofline's %). The other
file is only read (SQLite's read-only mode): opening it as a Store would migrate it. A file
that is not a run database, or one written by a newer fmha-workbench, is refused before
anything is written (:class:`ImportRefused`, one line).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

from workbench.store import SCHEMA_VERSION, Store, StoreError, content_uuid
from workbench.store.files import held_here, real_db_path
from workbench.store.schema import foreign_reason, tables_and_columns


class ImportRefused(StoreError):
    """The other file cannot be imported; the message says why, in one line."""


@dataclass(frozen=True)
class ImportResult:
    source: Path
    added: tuple[int, ...]  # the new ids of the runs copied in
    skipped: int  # runs the open database already had
    groups_added: int
    unreadable: int = 0  # runs of a damaged file that could not be read
    ceilings_of: tuple[str, ...] = ()  # GPUs whose measured ceilings came with the runs

    def line(self) -> str:
        runs = f"{len(self.added)} run{'s' if len(self.added) != 1 else ''}"
        tail = f"; {self.skipped} already here" if self.skipped else ""
        tail += f"; {self.unreadable} could not be read (damaged)" if self.unreadable else ""
        groups = f" in {self.groups_added} new group{'s' if self.groups_added != 1 else ''}"
        if self.ceilings_of:
            tail += f"; with the measured ceilings of {', '.join(self.ceilings_of)}"
        return f"imported {runs}{groups if self.groups_added else ''} from {self.source}{tail}"


def _open_source(path: Path) -> sqlite3.Connection:
    """The other database, read-only; refused unless it is a run database we can read."""
    if not path.is_file():
        raise ImportRefused(f"cannot import {path}: no such file")
    if not held_here(real_db_path(path)):  # a file this process has open is read by SQLite
        with path.open("rb") as handle:
            if handle.read(16) != b"SQLite format 3\x00":
                raise ImportRefused(
                    f"cannot import {path}: not a run database (not an SQLite file)"
                )
    # A writer's -wal lies beside the file a symlink names, not beside the link.
    real = real_db_path(path)
    # Immutable when no writer has a journal open (nothing unflushed to miss): a read-only
    # connection to a WAL database would otherwise leave -wal and -shm files beside it.
    immutable = "&immutable=1" if not real.with_name(real.name + "-wal").exists() else ""
    try:
        # Quoted: a "?", "#" or "%" in the path is part of the name, not of the URI.
        address = f"file:{quote(str(real.absolute()))}?mode=ro{immutable}"
        conn = sqlite3.connect(address, uri=True)
        conn.row_factory = sqlite3.Row
        tables = tables_and_columns(conn)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise ImportRefused(f"cannot import {path}: {exc}") from exc
    # The store's own rule (workbench.store.schema): a look-alike of version 0 is refused too.
    reason = foreign_reason(tables, version, columns_known=True)
    if reason is not None or not tables:
        conn.close()
        raise ImportRefused(f"cannot import {path}: not a run database ({reason or 'empty'})")
    if version > SCHEMA_VERSION:
        conn.close()
        raise ImportRefused(
            f"cannot import {path}: written by a newer fmha-workbench (schema {version}, this "
            f"one knows {SCHEMA_VERSION}); upgrade to import it"
        )
    return conn


def check_source(path: Path) -> None:
    """Refuse ``path`` (ImportRefused, one line) unless it is a run database we can import."""
    _open_source(path).close()


def _rows(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> list[dict]:
    return [dict(row) for row in conn.execute(sql, params)]


def _readable(
    conn: sqlite3.Connection,
    sql: str,
    tables: Any,
    table: str,
    params: tuple[Any, ...] = (),
) -> list[dict]:
    """The rows of ``sql`` on an optional ``table``; none where it is absent or damaged (a
    run then comes without its group or block maps, its points kept)."""
    if table not in tables:
        return []
    try:
        return _rows(conn, sql, params)
    except sqlite3.DatabaseError:
        return []


def _readable_runs(conn: sqlite3.Connection) -> tuple[list[dict], int]:
    """Every run the file can still give, and how many it cannot: a damaged database (one
    set aside by the store) is read run by run, so one bad page loses only the runs on it."""
    try:
        listed = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    except sqlite3.DatabaseError:
        listed = None
    try:
        runs = _rows(conn, "SELECT * FROM runs ORDER BY id")
        # A damaged page can hide rows without an error: the count says how many are missing.
        return runs, max(0, (listed or 0) - len(runs))
    except sqlite3.DatabaseError:
        pass
    last = conn.execute("SELECT max(id) FROM runs").fetchone()[0] or 0
    runs, unreadable = [], 0
    for run_id in range(1, last + 1):
        try:
            runs += _rows(conn, "SELECT * FROM runs WHERE id = ?", (run_id,))
        except sqlite3.DatabaseError:
            unreadable += 1
    return runs, max(unreadable, (listed or 0) - len(runs))


def _identity(kind: str, row: dict[str, Any]) -> str:
    return row.get("uuid") or content_uuid(kind, row)


def import_runs(store: Store, source: str | Path) -> ImportResult:
    """Copy every run of ``source`` that ``store`` does not have yet (by identity), with its
    group, points and block maps, in one transaction: all of it or, on an error, nothing."""
    path = Path(source).expanduser()
    if path.resolve() == store.path.resolve():
        raise ImportRefused(f"cannot import {path}: it is the database open here")
    if store.read_only:
        raise ImportRefused(f"cannot import into {store.path}: {store.notice or 'read-only'}")
    conn = _open_source(path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        runs, unreadable = _readable_runs(conn)
        first_unreadable = unreadable
        groups = {g["id"]: g for g in _readable(conn, "SELECT * FROM groups", tables, "groups")}
        have_runs = {r["uuid"] for r in store.db.query("SELECT uuid FROM runs")}
        have_groups = {g["uuid"]: g["id"] for g in store.db.query("SELECT id, uuid FROM groups")}
        wanted = [r for r in runs if _identity("run", r) not in have_runs]
        ceilings = _new_ceilings(conn, tables, store, wanted)
        points: dict[int, list[dict[str, Any]]] = {}
        maps: dict[int, dict[str, Any]] = {}
        for r in list(wanted):
            try:  # a run whose points sit on a damaged page is left out, and counted
                points[r["id"]] = _rows(
                    conn, "SELECT * FROM points WHERE run_id = ? ORDER BY id", (r["id"],)
                )
            except sqlite3.DatabaseError:
                wanted.remove(r)
                unreadable += 1
                continue
            block_sql = (
                "SELECT b.* FROM block_maps b JOIN points p ON p.id = b.point_id WHERE p.run_id = ?"
            )
            for row in _readable(conn, block_sql, tables, "block_maps", (r["id"],)):
                maps[row["point_id"]] = row
    except sqlite3.DatabaseError as exc:
        raise ImportRefused(f"cannot import {path}: {exc}") from exc
    finally:
        conn.close()

    point_columns = {c.name for c in store.db.table("points").columns}
    run_columns = {c.name for c in store.db.table("runs").columns}

    def copy() -> tuple[list[int], int]:
        added: list[int] = []
        new_groups: dict[int, int] = {}  # the source's group id: its id here
        for run in wanted:
            group_id = run.get("group_id")
            if group_id is not None and group_id in groups:
                group = groups[group_id]
                identity = _identity("group", group)
                if identity not in have_groups:
                    table = store.db.table("groups")
                    table.insert(
                        {
                            "kind": group["kind"],
                            "label": group["label"],
                            "created_at": group["created_at"],
                            "spec": group["spec"],
                            "uuid": identity,
                        }
                    )
                    have_groups[identity] = int(cast(int, table.last_pk))
                    new_groups[group_id] = have_groups[identity]
                group_id = have_groups[identity]
            else:
                group_id = None
            row = {k: v for k, v in run.items() if k in run_columns and k != "id"}
            row.update(group_id=group_id, uuid=_identity("run", run))
            runs_table = store.db.table("runs")
            runs_table.insert(row)
            run_id = int(cast(int, runs_table.last_pk))
            added.append(run_id)
            for point in points[run["id"]]:
                values = {k: v for k, v in point.items() if k in point_columns and k != "id"}
                values["run_id"] = run_id
                points_table = store.db.table("points")
                points_table.insert(values)
                block = maps.get(point["id"])
                if block is not None:
                    store.db.table("block_maps").insert(
                        {**block, "point_id": int(cast(int, points_table.last_pk))}
                    )
        for record in ceilings:  # the roofline's % for the imported runs, as on their machine
            store.db.table("machine_ceilings").insert(record)
        return added, len(new_groups)

    added, groups_added = store._write(copy)  # one transaction: the whole file or nothing
    skipped = len(runs) - len(wanted) - (unreadable - first_unreadable)
    gpus = tuple(sorted({str(r["gpu_name"]) for r in ceilings}))
    return ImportResult(path, tuple(added), skipped, groups_added, unreadable, gpus)


def _new_ceilings(
    conn: sqlite3.Connection, tables: set[str], store: Store, runs: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The source's measured ceilings of the GPUs the imported ``runs`` ran on that ``store``
    does not hold yet (same GPU and time of measurement): without them an imported run has no
    % of roofline here, though it had one on its machine."""
    gpus = set()
    for run in runs:
        with contextlib.suppress(ValueError, TypeError):
            gpus.add(json.loads(run.get("machine") or "{}").get("gpu_name"))
    gpus.discard(None)
    gpus.discard("")
    if not gpus or "machine_ceilings" not in tables:
        return []
    have = {(c["gpu_name"], c["measured_at"]) for c in store.ceilings()}
    rows = _readable(conn, "SELECT * FROM machine_ceilings ORDER BY id", tables, "machine_ceilings")
    return [
        {"gpu_name": r["gpu_name"], "measured_at": r["measured_at"], "record": r["record"]}
        for r in rows
        if r["gpu_name"] in gpus and (r["gpu_name"], r["measured_at"]) not in have
    ]
