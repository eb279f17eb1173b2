"""How the store waits for SQLite's write lock: every write holds it from its first statement,
and a lock another writer holds is retried with backoff before a clear error.

The limits are read when used, so a test may lower them on this module.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from workbench.store.errors import StoreLocked

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


def is_locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def write_transaction(conn: sqlite3.Connection, action: Callable[[], T]) -> T:
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


def retry(path: Path, action: Callable[[], T], *, patience_s: float = 0.0) -> T:
    """``action``, retried with backoff while another writer holds the lock of the database at
    ``path``; with ``patience_s``, retried (every second at most) until that long has passed."""
    delay = 0.05
    deadline = time.monotonic() + patience_s
    attempt = 0
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if not is_locked(exc):
                raise
            attempt += 1
            if attempt > LOCK_RETRIES and time.monotonic() >= deadline:
                raise StoreLocked(
                    f"{path} stayed locked by another writer; try again when it has finished"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
