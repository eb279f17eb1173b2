"""A real small file system for disk-full tests: a tmpfs of a few hundred KB mounted in the
test's folder (root only, as here and in CI), and a way to fill it to the last few KB."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_filesystem(folder: Path, size_kb: int = 256) -> Iterator[Path]:
    """``folder`` with a tmpfs of ``size_kb`` mounted on it; the test is skipped, saying why,
    where this process may not mount one."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mounted.stderr.strip()}): needs root")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path, leave_bytes: int = 0) -> Path:
    """Fill ``folder``'s file system with one file until a write fails with ENOSPC, then give
    back ``leave_bytes`` (rounded to whole pages), so the next writes fail part-way."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while os.write(fd, b"\xa5" * 4096):
            pass
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    if leave_bytes:
        size = filler.stat().st_size
        os.truncate(filler, max(0, size - -(-leave_bytes // 4096) * 4096))
    return filler
