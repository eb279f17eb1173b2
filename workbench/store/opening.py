"""Opening the run database: the file checked before anything touches it, a connection fit
for the store's mode (writing, ``read_only``, a newer schema kept query-only), an older schema
migrated (in a copy in memory where nothing may be written), a damaged file set aside by a
writer, runs of dead processes marked interrupted, and every write's wait for the lock."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

import sqlite_utils

import workbench.store.damage as damage
import workbench.store.files as files
import workbench.store.locking as locking
import workbench.store.schema as schema
from workbench.store.errors import StoreError, StoreLocked
from workbench.store.owners import owner_alive
from workbench.store.records import INTERRUPTED_ERROR, utc_now

T = TypeVar("T")


class OpenedStore:
    """The run database, open. ``notice`` carries anything the user should be told about
    opening it; :class:`workbench.store.Store` adds the writes and reads.

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
        self.path = files.real_db_path(Path(path) if path is not None else files.default_db_path())
        self.notice: str | None = None
        self.read_only, self.upgrade, self.upgrade_from = read_only, upgrade, None
        self._busy_timeout_s = locking.BUSY_TIMEOUT_S if busy_timeout_s is None else busy_timeout_s
        try:
            header = files.check_file(self.path, read_only=self.read_only)
            if header is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = self._open_checked(header)
            files.hold(self.path, header)  # released by close()
        except sqlite3.OperationalError as exc:
            if locking.is_locked(exc):
                raise StoreLocked(
                    f"{self.path} is locked by another program; close it (or the other "
                    "fmha-workbench) and try again"
                ) from exc
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot read {self.path}: {exc}; nothing was changed") from exc
        except OSError as exc:
            raise StoreError(f"cannot open {self.path}: {exc.strerror or exc}") from exc

    @property
    def busy_timeout_s(self) -> float:
        """How long one statement waits for another writer's lock before the store's retries."""
        return self._busy_timeout_s

    # opening ---------------------------------------------------------------------------------

    def _connect(self, *, read_only: bool = False, immutable: bool = False) -> sqlite3.Connection:
        if read_only:
            uri = f"file:{quote(str(self.path.absolute()))}?mode=ro" + "&immutable=1" * immutable
            conn = sqlite3.connect(
                uri, uri=True, timeout=self._busy_timeout_s, **locking.ANY_THREAD
            )
        else:
            conn = sqlite3.connect(
                str(self.path), timeout=self._busy_timeout_s, **locking.ANY_THREAD
            )
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _connect_read_only(self, *, brief: bool = True) -> sqlite3.Connection:
        """``mode=ro``. For a ``brief`` read (a command's), ``immutable`` where nobody has the
        file open (no -wal/-shm beside it): a read-only WAL connection would leave -wal/-shm
        files it cannot remove. Where ``mode=ro`` cannot open (a WAL file in a folder this
        user cannot write), ``immutable`` too: nobody can be writing it there."""
        if brief and not files.has_side_files(self.path):
            return self._connect(read_only=True, immutable=True)
        conn = self._connect(read_only=True)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            if locking.is_locked(exc):
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
            if locking.is_locked(exc):
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
        if tables and version < schema.SCHEMA_VERSION and not (self.read_only or self.upgrade):
            files.defer_upgrade(self, version, schema.SCHEMA_VERSION)  # upgraded when written
        if version > schema.SCHEMA_VERSION:
            conn = self._connect_read_only() if self.read_only else self._connect_query_only()
            schema.check_readable(conn, self.path)
            self.read_only = True
            self.notice = (
                f"{self.path} was written by a newer fmha-workbench (schema {version}, this one "
                f"knows {schema.SCHEMA_VERSION}); it is open read-only. Upgrade to add runs to it."
            )
            return sqlite_utils.Database(conn)
        if self.read_only:
            if version == schema.SCHEMA_VERSION:
                return sqlite_utils.Database(self._connect_read_only())
            # An empty file or an older schema: read a migrated copy, leave the file alone.
            memory = sqlite3.connect(":memory:", **locking.ANY_THREAD)
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
        reason = schema.foreign_reason(tables, version)  # the rule import follows too
        if reason is not None:
            raise StoreError(f"{self.path} is {reason}, not a run database; nothing was changed")

    def _damaged(self, header: bytes, exc: Exception) -> sqlite_utils.Database:
        """A file SQLite cannot read. Set aside (by a writer only) if it is a run database, by
        the schema version in its header; anything else is refused untouched."""
        header_version = int.from_bytes(header[60:64], "big") if len(header) >= 64 else 0
        problem = damage.one_line(str(exc))  # quick_check's report is lines; one is said
        if not 1 <= header_version <= schema.SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} is not a readable run database ({problem}); nothing was changed"
            )
        if self.read_only:
            raise StoreError(damage.refusal(self.path, problem))
        moved = files.set_aside(self.path)
        self.notice = damage.set_aside_notice(self.path, moved, str(exc))
        conn = self._connect()
        db = sqlite_utils.Database(conn)
        self._retry(db.enable_wal)
        self._migrate(db, 0)
        return db

    def _migrate(self, db: sqlite_utils.Database, version: int) -> None:
        schema.apply_migrations(db, version, self._retry)

    def _mark_interrupted(self, db: sqlite_utils.Database) -> None:
        """Runs left 'running' by a process that no longer exists become failed."""
        rows = list(db.query("SELECT id, machine FROM runs WHERE status = 'running'"))
        dead = [r["id"] for r in rows if not owner_alive(json.loads(r["machine"] or "{}"))]
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

        self._retry(lambda: locking.write_transaction(db.conn, mark))

    def _retry(self, action: Callable[[], T], *, patience_s: float = 0.0) -> T:
        """``action``, retried with backoff while another writer holds the lock; with
        ``patience_s``, retried (every second at most) until that long has passed."""
        return locking.retry(self.path, action, patience_s=patience_s)
