"""How the store opens a file: the path SQLite really opens, and what a window may do with an
older schema or a read-only place without writing to the file (issue #51)."""

from __future__ import annotations

import os
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
