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


def count(n: int, delay: float = 0.0):  # type: ignore[no-untyped-def]
    """A stream: 0 .. n-1, ``delay`` seconds apart."""
    for i in range(n):
        time.sleep(delay)
        yield i


def count_then_crash(n: int):  # type: ignore[no-untyped-def]
    yield from range(n)
    os.kill(os.getpid(), signal.SIGSEGV)


def count_then_refuse(n: int):  # type: ignore[no-untyped-def]
    from workbench.config import ConfigError

    yield from range(n)
    raise ConfigError("heads", 3, "expected a divisor of the query heads")


def engine_grandchild_pid(pid_file: str, fork_server: bool = False) -> None:
    """Start an engine of this process's own (as a window's job child does for its GPU
    members; ``fork_server``: from a fork server, as a window does), write that engine child's
    pid, and keep it busy in a long call."""
    from workbench.run.engine import Engine, use_fork_server

    if fork_server:
        use_fork_server()

    engine = Engine(timeout_s=120)
    engine.start()
    with open(pid_file, "w") as f:
        f.write(str(engine.pid))
    engine.call("tests.engine.helpers:hang", 60.0)
