"""Functions the engine child runs in the isolation tests (importable by a spawn child)."""

from __future__ import annotations

import os
import signal
import time


def pid() -> int:
    return os.getpid()


def add(a: int, b: int) -> int:
    return a + b


def crash_hard() -> None:
    """Die the way a fault in native code does: no Python exception, no reply."""
    os.kill(os.getpid(), signal.SIGSEGV)


def hang(seconds: float) -> None:
    time.sleep(seconds)


def fail(message: str) -> None:
    raise RuntimeError(message)


def cuda_home() -> str | None:
    return os.environ.get("CUDA_HOME")
