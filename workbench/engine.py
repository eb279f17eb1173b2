"""The supervised GPU engine: GPU work runs in a child process.

A kernel fault (an illegal memory access) poisons a CUDA context for good, and a hang never
returns, so the workbench never touches the GPU in its own process. :class:`Engine` starts a
``spawn`` child, sends it one call at a time and waits with a time limit. When the child dies
or overruns, the call raises :class:`EngineFailure` with what is known, the child is killed, and
the next call starts a fresh one. After any error inside the child the child also exits, because
a CUDA error may have left its context unusable.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing as mp
import os
import traceback
from multiprocessing.connection import Connection
from typing import Any

from workbench.backends.base import BackendError

# A first cuTile compile of a large tile takes tens of seconds, an autotune minutes;
# FMHA_WORKBENCH_ENGINE_TIMEOUT overrides it.
DEFAULT_TIMEOUT_S = float(os.environ.get("FMHA_WORKBENCH_ENGINE_TIMEOUT", "900"))


class EngineFailure(BackendError):
    """The child crashed, hung or raised; the message carries its error text."""


def _resolve(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        value = getattr(value, part)
    return value


def _serve(conn: Connection, unset: tuple[str, ...] = ()) -> None:
    """Child loop: run calls until told to stop or until one fails.

    ``unset`` names environment variables to drop before anything CUDA loads (a CUDA_HOME that
    would break tileiras); doing it here leaves the parent's environment untouched."""
    for name in unset:
        os.environ.pop(name, None)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        target, args, kwargs = message
        try:
            result = _resolve(target)(*args, **kwargs)
        except BaseException as exc:  # report everything; the parent decides what it means
            conn.send(("error", type(exc).__name__, str(exc), traceback.format_exc(limit=12)))
            return  # a CUDA error may have poisoned this context: start afresh next time
        conn.send(("ok", result))


class Engine:
    """One supervised child process, started on first use and restarted after a failure."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._context = mp.get_context("spawn")
        self._process: mp.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _start(self) -> None:
        from workbench.backends.gpu import cuda_home_problem

        parent, child = self._context.Pipe()
        unset = ("CUDA_HOME", "CUDA_PATH") if cuda_home_problem() else ()
        process = self._context.Process(
            target=_serve, args=(child, unset), name="fmha-gpu-engine", daemon=True
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent

    def _stop(self, *, kill: bool) -> int | None:
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if conn is not None:
            if not kill:
                with contextlib.suppress(OSError, ValueError):
                    conn.send(None)
            conn.close()
        if process is None:
            return None
        if kill:
            process.kill()
        process.join(timeout=10)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)
        return process.exitcode

    def call(self, target: str, *args: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        """Run ``module:function`` in the child and return its result."""
        if self._process is None or not self._process.is_alive():
            if self._process is not None:
                self._stop(kill=True)
                self.restarts += 1
            self._start()
        assert self._conn is not None
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            self._conn.send((target, args, kwargs))
            ready = self._conn.poll(limit)
            reply = self._conn.recv() if ready else None
        except (EOFError, OSError, BrokenPipeError):
            reply = ("died",)
        except Exception as exc:  # a reply that cannot be unpickled: report it, keep going
            self._stop(kill=True)
            self.restarts += 1
            raise EngineFailure(f"the GPU engine's reply could not be read: {exc}") from exc
        if reply is None:
            self._stop(kill=True)
            self.restarts += 1
            raise EngineFailure(
                f"the GPU engine did not answer within {limit:.0f} s (a hang?); it was stopped "
                "and will be restarted for the next run"
            )
        if reply[0] == "ok":
            return reply[1]
        if reply[0] == "error":
            _, kind, text, trace = reply
            self._stop(kill=False)
            self.restarts += 1
            error = EngineFailure(f"{kind}: {text}")
            error.child_traceback = trace  # type: ignore[attr-defined]
            raise error
        code = self._stop(kill=True)
        self.restarts += 1
        raise EngineFailure(
            f"the GPU engine process died (exit code {code}); it will be restarted for the next run"
        )

    def kill(self) -> None:
        """End the child now, from any thread (the user cancelled a long point): the call
        waiting on it raises EngineFailure, and the next call starts a fresh child."""
        process = self._process
        if process is not None and process.is_alive():
            process.kill()

    def close(self) -> None:
        self._stop(kill=False)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
