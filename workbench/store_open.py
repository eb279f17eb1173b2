"""How the store opens a file: the path SQLite really opens, and what a window may do with an
older schema or a read-only place without writing to the file (issue #51)."""

from __future__ import annotations

import os
from pathlib import Path


def real_db_path(path: Path) -> Path:
    """``path`` with a symlink at its end followed: SQLite opens (and keeps its -wal and -shm
    beside) the target, so every check beside the file must look there, not beside the link."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def has_side_files(path: Path) -> bool:
    """Whether a -wal or -shm lies beside ``path``: some connection has (or had) it open."""
    return any(path.with_name(path.name + suffix).exists() for suffix in ("-wal", "-shm"))
