"""Which file the store opens and whether it may: where the database lives, the path SQLite
really opens (a symlink followed), what cannot be a run database (a folder, a device, a FIFO,
not SQLite), read-only places, an older schema a window defers, and setting a damaged file
aside (issue #51)."""

from __future__ import annotations

import os
import stat
from datetime import datetime
from pathlib import Path
from typing import Any

from workbench.safe_write import SQLITE_MAGIC
from workbench.store.errors import StoreError

APP_NAME = "fmha-workbench"


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


# The database files this process holds open through a store: path -> (pid, header, count).
# Closing any other descriptor of a file SQLite has open drops every POSIX lock this process
# holds on it (SQLite's documented hazard). Another process's last connection then finds the
# file unused, checkpoints, and deletes the -wal and -shm this process's connection still maps,
# so that connection never sees a later run (the window's History stopped at the run before).
# A file held here is therefore never opened again outside SQLite: its header is the one read
# when the first store opened it.
_held: dict[Path, tuple[int, bytes, int]] = {}


def hold(path: Path, header: bytes | None) -> None:
    """A store of this process now has ``path`` open (``header``: what check_file read; None
    for a file it created)."""
    pid, kept, count = _held.get(path, (os.getpid(), header or SQLITE_MAGIC, 0))
    if pid != os.getpid():  # inherited through a fork: not this process's connection
        kept, count = header or SQLITE_MAGIC, 0
    _held[path] = (os.getpid(), kept, count + 1)


def release(path: Path) -> None:
    """A store of this process closed ``path``."""
    pid, header, count = _held.get(path, (0, b"", 0))
    if pid != os.getpid() or count <= 1:
        _held.pop(path, None)
    else:
        _held[path] = (pid, header, count - 1)


def held_here(path: Path) -> bool:
    """Whether a store of this process has ``path`` open (then only SQLite may open it)."""
    return _held_header(path) is not None


def _held_header(path: Path) -> bytes | None:
    found = _held.get(path)
    return found[1] if found is not None and found[0] == os.getpid() else None


def check_file(path: Path, *, read_only: bool) -> bytes | None:
    """The file's first 100 bytes (its SQLite header; b"" for an empty file), None when there
    is no file. Whatever cannot be a run database is refused here, untouched."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if read_only:
            raise StoreError(f"no run database at {path}") from None
        return None
    if problem := not_a_file(path, info):
        raise StoreError(problem)
    header = _held_header(path)
    if header is None:  # nobody here has it open: reading it cannot drop a lock
        with open(path, "rb") as handle:
            header = handle.read(100)
    if header and not header.startswith(SQLITE_MAGIC):
        raise StoreError(f"{path} is not a run database (not an SQLite file); nothing was changed")
    # A writer refused up front: SQLite would leave a -wal and -shm it cannot remove.
    if not read_only and (place := read_only_place(path)):
        raise StoreError(f"cannot write to {path}: {place}; nothing was changed")
    return header


def set_aside(path: Path) -> Path:
    """Move the damaged file at ``path`` (with its -wal and -shm) to a timestamped name beside
    it; returns where it went."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
        n += 1
    path.rename(target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    return target
