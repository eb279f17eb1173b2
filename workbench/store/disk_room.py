"""Room left on the disk that holds a run database, so a sweep stops while it can still store
why: on a disk already full even the write that marks the run failed fails, and the run would
later read "interrupted" with its reason lost."""

from __future__ import annotations

import errno
import os
from pathlib import Path

# The errors of a write the disk refused (a failed write, exit 1), not of a path that is wrong.
WRITE_FAILURES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG})

# Kept free for the run's last writes (its status and reason, a checkpoint of the log): a few
# WAL frames of 4 KB each, with room to spare.
RESERVE_BYTES = 96 * 1024


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer may still use on ``path``'s file system; None where that
    cannot be asked (the sweep then simply goes on)."""
    try:
        info = os.statvfs(path.parent if not path.is_dir() else path)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def too_little_room(path: Path, reserve: int = RESERVE_BYTES) -> str | None:
    """Why no more points should be stored in the database at ``path``; None while there is
    room."""
    room = free_bytes(path)
    if room is None or room >= reserve:
        return None
    return (
        f"the disk holding {path} is full ({room // 1024} KB free, {reserve // 1024} KB are "
        "kept for the run's last writes)"
    )
