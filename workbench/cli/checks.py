"""Checks of the command line's input that need the store or the file system, said in one line
naming what the user typed (:class:`~workbench.cli.values.UsageError`, exit 2)."""

from __future__ import annotations

import contextlib
import errno
import sqlite3
from pathlib import Path

from workbench.cli.values import UsageError
from workbench.store import Store, StoreError, StoreWriteFailed


def check_db_folder(db: str | None) -> None:
    """A ``--db`` in a folder that does not exist is refused (the window asks before making
    one): a mistyped folder would otherwise start a database nobody will find."""
    if db is None:
        return  # the default database's folder is the workbench's own to make
    folder = Path(db).expanduser().parent
    if not folder.exists():
        raise UsageError(
            f"--db {db}: the folder {folder} does not exist; create it first "
            f"(mkdir -p {folder}) or give another path"
        )
    if not folder.is_dir():
        raise UsageError(f"--db {db}: {folder} is not a folder")


def check_report_subject(store: Store, group_ids: list[int], subject: str | None) -> None:
    """A ladder has no peers to be the subject among: a ``--subject`` other than its backend
    would be ignored, so it is refused."""
    from workbench.jobs.ladder_steps import GROUP_KIND as LADDER_GROUP_KIND

    for group_id in group_ids if subject is not None else []:
        if store.group(group_id).get("kind") != LADDER_GROUP_KIND:
            continue  # a group of peers: the report itself says when the subject is not in it
        backends = sorted({r.backend for r in store.group_runs(group_id)})
        if subject not in backends:
            raise UsageError(
                f"--subject {subject}: group {group_id} is a ladder of {', '.join(backends)} "
                "(one backend, step by step); a subject is for groups timed together"
            )


# SQLite's result code for a full disk (sqlite3 has it, its type stubs do not).
SQLITE_FULL = getattr(sqlite3, "SQLITE_FULL", 13)


def _disk_full(exc: BaseException) -> bool:
    cause = exc.__cause__
    if isinstance(cause, OSError):
        return cause.errno == errno.ENOSPC
    return getattr(cause, "sqlite_errorcode", None) == SQLITE_FULL


def open_store(path: Path, *, read_only: bool) -> Store:
    """The store at ``path``. Where opening fails, a file this call created is removed (a full
    disk left a 0-byte database behind), and a full disk is a failed write (exit 1), not bad
    input."""
    existed = path.exists() or path.is_symlink()
    try:
        return Store(path, read_only=read_only)
    except StoreError as exc:
        if not existed and path.is_file() and path.stat().st_size == 0:
            for made in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))):
                with contextlib.suppress(OSError):
                    made.unlink()
        if _disk_full(exc):
            raise StoreWriteFailed(str(exc)) from exc
        raise
