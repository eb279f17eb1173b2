"""How the store opens a file: the path SQLite really opens, and what a window may do with an
older schema or a read-only place without writing to the file (issue #51)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any


def real_db_path(path: Path) -> Path:
    """``path`` with a symlink at its end followed: SQLite opens (and keeps its -wal and -shm
    beside) the target, so every check beside the file must look there, not beside the link."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def has_side_files(path: Path) -> bool:
    """Whether a -wal or -shm lies beside ``path``: some connection has (or had) it open."""
    return any(path.with_name(path.name + suffix).exists() for suffix in ("-wal", "-shm"))


def defer_upgrade(store: Any, version: int, current: int) -> None:
    """Open ``store`` (schema ``version``, older than ``current``) read-only, as it is: opening
    a file must not rewrite it; the window upgrades it when the user first writes to it."""
    store.read_only, store.upgrade_from = True, version
    store.notice = (
        f"{store.path} has an older schema ({version}); it is shown as it is and nothing is "
        f"written to it until a sweep, an import or File › Upgrade database upgrades it to "
        f"schema {current}."
    )


def read_only_place(path: Path) -> str | None:
    """Why nothing may write the existing file ``path`` (read-only media, a read-only file or
    folder: SQLite's -wal, -shm and journal lie beside it), or None (also when it is absent)."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "it is on read-only media"
    except OSError:
        return None  # no file yet: a writer creates it (or says why it cannot)
    if not os.access(path, os.W_OK):
        return "the file is read-only"
    if not os.access(path.parent, os.W_OK):
        return f"its folder {path.parent} is read-only"
    return None


def not_a_file(path: Path, info: os.stat_result) -> str | None:
    """Why ``path`` (``info`` its stat) cannot be a run database file: a folder, a device, a
    pipe or a socket; None for a regular file."""
    if stat.S_ISDIR(info.st_mode):
        return f"cannot open {path}: it is a folder, not a database file"
    if not stat.S_ISREG(info.st_mode):
        return (
            f"cannot open {path}: it is not a regular file (a device, a pipe or a socket), so "
            "it cannot be a run database"
        )
    return None
