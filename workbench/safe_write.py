"""Writing a file the user named (a CSV export, a README table, a PNG) without trapping them.

* A regular file (or a missing one) is replaced atomically: the new content goes to an unnamed
  temporary file in the target's folder (``O_TMPFILE``; where the file system lacks it, an
  exclusively created file with an unpredictable name), which is renamed over the target only
  when complete. Nothing follows a link planted at a temporary name, and an interruption (even
  ``kill -9`` where ``O_TMPFILE`` works) leaves the target as it was and no partial file behind.
* A target that is not a regular file (stdout ``-``, a FIFO, a character device, a process
  substitution) is written in place and never renamed over; a FIFO with no reader is refused.
* A symbolic link is kept: the file it points to gets the new content.
* A target that is the open run database, or any SQLite file, is refused before anything is
  written: exporting onto a database would destroy its runs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

SQLITE_MAGIC = b"SQLite format 3\x00"


class UnsafeTarget(ValueError):
    """The file the user named cannot be written safely; the message says why."""


def is_sqlite_file(path: str | os.PathLike[str]) -> bool:
    """Does ``path`` hold an SQLite database (its 16-byte magic header)? A FIFO or a device is
    never opened: reading one could block or consume its data."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_target(
    path: str | os.PathLike[str], *, protected: Iterable[str | os.PathLike[str]] = ()
) -> Path:
    """``path`` as a target the caller may write, or :class:`UnsafeTarget` saying why not:
    empty, a folder, one of ``protected`` (the open database and its -wal/-shm files), or any
    SQLite database."""
    text = os.fspath(path)
    if not text or not text.strip():
        raise UnsafeTarget("no file name given")
    if "\x00" in text:
        raise UnsafeTarget("the file name contains a NUL character")
    target = Path(text).expanduser()
    if target.is_dir():
        raise UnsafeTarget(f"{target} is a folder; name a file")
    where = os.path.realpath(target)
    for guarded in protected:
        guarded = Path(guarded)
        for suffix in ("", "-wal", "-shm", "-journal"):
            side = guarded.with_name(guarded.name + suffix)
            # By name too: a file made at runs.db-wal would be taken for the database's log.
            if _same_file(target, side) or where == os.path.realpath(side):
                raise UnsafeTarget(
                    f"{target} is the open run database; writing there would destroy its runs"
                )
    if is_sqlite_file(target):
        raise UnsafeTarget(
            f"{target} is an SQLite database; refusing to overwrite it (choose another name)"
        )
    return target


def write_bytes_safely(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    protected: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write ``data`` to ``path`` as the module docstring says; returns the path written.
    Raises :class:`UnsafeTarget` for a refused target and ``OSError`` for a failed write (the
    target is then as it was)."""
    target = check_target(path, protected=protected)
    try:
        mode = os.stat(target).st_mode  # follows a link: the file it points to
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        # A FIFO, a device, a pipe: its reader is waiting for this content right there.
        with os.fdopen(_open_in_place(target, mode), "wb") as handle:
            handle.write(data)
        return target
    final = Path(os.path.realpath(target)) if target.is_symlink() else target
    _replace_atomically(final, data, mode)
    return target


def _open_in_place(target: Path, mode: int) -> int:
    """A descriptor writing into a FIFO or device; a FIFO nobody reads is refused at once
    (opened blocking, the export would wait for a reader forever)."""
    if not stat.S_ISFIFO(mode):
        return os.open(target, os.O_WRONLY)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise UnsafeTarget(
                f"{target} is a FIFO with no reader, so nothing would take the rows; start its "
                "reader first, or write to stdout with -"
            ) from None
        raise
    os.set_blocking(fd, True)  # a slow reader is waited for, not failed with EAGAIN
    return fd


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _replace_atomically(final: Path, data: bytes, mode: int | None) -> None:
    folder = final.parent if str(final.parent) else Path(".")
    permissions = stat.S_IMODE(mode) if mode is not None else _default_mode()
    named = _write_unnamed(folder, final.name, data, permissions)
    if named is None:  # no O_TMPFILE here (or it cannot be linked): a named temporary file
        fd, named = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".partial", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                _fill(handle, data, permissions)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(named)
            raise
    try:
        os.replace(named, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(named)
        raise


def _fill(handle: BinaryIO, data: bytes, permissions: int) -> None:
    handle.write(data)
    handle.flush()
    os.fchmod(handle.fileno(), permissions)
    os.fsync(handle.fileno())


def _write_unnamed(folder: Path, name: str, data: bytes, permissions: int) -> str | None:
    """``data`` in an unnamed file in ``folder`` (O_TMPFILE: an interruption, even kill -9,
    leaves nothing behind), named under an unpredictable name only once complete; None where
    the system or the file system cannot."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag:
        return None
    try:
        fd = os.open(folder, flag | os.O_WRONLY, 0o600)
    except OSError:
        return None
    with os.fdopen(fd, "wb") as handle:
        _fill(handle, data, permissions)
        # A folder descriptor makes os.link call linkat with AT_SYMLINK_FOLLOW (plain link()
        # would try to link /proc's symlink itself and fail).
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(16):
                named = f".{name}.{secrets.token_hex(8)}.partial"
                try:
                    os.link(
                        f"/proc/self/fd/{handle.fileno()}",
                        named,
                        dst_dir_fd=folder_fd,
                        follow_symlinks=True,
                    )
                    return str(folder / named)
                except FileExistsError:
                    continue
                except OSError:
                    return None
        finally:
            os.close(folder_fd)
    return None
