"""The supervised engine: the one way the workbench computes in a child process.

A kernel fault (an illegal memory access) poisons a CUDA context for good, and a hang never
returns, so the workbench never touches the GPU in its own process; and a CPU backend's Python
loops would hold the GIL a window needs to repaint. :class:`Engine` starts a child and
talks to it over one pipe, one request at a time:

- :meth:`Engine.call` runs ``module:function`` there and returns its result (the GPU backends'
  every device call, :mod:`workbench.backends.isolated`);
- :meth:`Engine.stream` runs a generator function there and yields what it yields as it comes
  (a whole job and its events, :mod:`workbench.jobs.background`).

Requests, parent to child: ``("call" | "stream", target, args, kwargs)``, or ``None`` to stop.
Replies, child to parent: ``("item", value)`` for each value a stream yields, then one of
``("ok", result)`` or ``("error", kind, text, traceback, exception)`` (the exception itself when
it pickles, else None).

When the child dies or a reply does not come within the time limit, the request raises
:class:`EngineFailure` with what is known, the child is killed, and the next request starts a
fresh one. After any error inside the child the child also exits, because a CUDA error may have
left its context unusable. :meth:`Engine.kill` ends the child from any thread (a cancel): the
request waiting on it raises EngineFailure with ``died`` set.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import math
import multiprocessing as mp
import os
import pickle
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from workbench.errors import BackendError
from workbench.measure.blas import limit_blas_threads
from workbench.measure.machine import cuda_home_problem

POLL_S = 0.25  # how often a wait checks that the child is still alive
# What a child imports before its first request (a job's run and a backend's calls), loaded
# once in the fork server (:func:`use_fork_server`) instead of in every child.
FORK_SERVER_PRELOAD = ("workbench.jobs.background", "workbench.backends.isolated")
_start_method = "spawn"


def default_timeout_s() -> float:
    """A first cuTile compile of a large tile takes tens of seconds, a tuner search minutes;
    FMHA_WORKBENCH_ENGINE_TIMEOUT overrides it (read now: a child forked from the fork server
    imported this module under the server's environment)."""
    return float(os.environ.get("FMHA_WORKBENCH_ENGINE_TIMEOUT", "900"))


def use_fork_server() -> None:
    """Start later children from a fork server that has imported what they need, and start it
    now, in the background: a window starts a child for every sweep and after every cancel,
    and a spawned child spent 0.4-0.6 s of CPU importing the workbench before its first
    request. Where the platform has no fork server (Windows) children stay spawned. A
    command-line run, which starts one child, keeps ``spawn``: a server would be one process
    more for it."""
    global _start_method
    if _start_method == "forkserver" or "forkserver" not in mp.get_all_start_methods():
        return
    from multiprocessing import forkserver

    context = mp.get_context("forkserver")
    context.set_forkserver_preload(list(FORK_SERVER_PRELOAD))
    with _main_module_hidden():
        forkserver.ensure_running()
    _start_method = "forkserver"


def _child_context() -> mp.context.SpawnContext | mp.context.ForkServerContext:
    if _start_method == "forkserver":
        return mp.get_context("forkserver")
    return mp.get_context("spawn")


class EngineFailure(BackendError):
    """The child crashed, hung or raised; the message carries its error text.

    ``died``: the child ended without a word (killed, a segfault); ``exitcode`` its exit code.
    ``original``: the exception raised in the child, when it could be sent back."""

    def __init__(
        self,
        message: str,
        *,
        died: bool = False,
        exitcode: int | None = None,
        original: BaseException | None = None,
        child_traceback: str = "",
    ) -> None:
        super().__init__(message)
        self.died = died
        self.exitcode = exitcode
        self.original = original
        self.child_traceback = child_traceback


def _resolve(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        value = getattr(value, part)
    return value


def _error_reply(exc: BaseException) -> tuple[Any, ...]:
    try:
        sent: BaseException | None = pickle.loads(pickle.dumps(exc))
    except Exception:
        sent = None
    return ("error", type(exc).__name__, str(exc), traceback.format_exc(limit=12), sent)


def _exit_when_orphaned() -> None:
    """End this child as the process that started it is gone: a GPU engine started by a
    window's job child must not keep computing after Cancel killed that job child. The
    parent's end of the start-up pipe closes with it (a forked child's own parent is the fork
    server, so its parent process id says nothing)."""
    parent = mp.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="orphan-guard", daemon=True).start()


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """While a child starts: ``spawn`` would run the parent's ``__main__`` again in it, so a
    user's script without an ``if __name__ == "__main__":`` guard (the README's example pasted
    into a file) ran itself in the engine child, which died starting an engine of its own. The
    child needs nothing of it: requests name ``module:function`` and carry workbench objects."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    names = [name for name in ("__file__", "__spec__") if name in main.__dict__]
    saved = {name: main.__dict__[name] for name in names}
    main.__dict__.pop("__file__", None)
    if "__spec__" in saved:
        main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.update(saved)


def _serve(conn: Connection, environment: dict[str, str], unset: tuple[str, ...] = ()) -> None:
    """Child loop: answer requests until told to stop or until one fails.

    ``environment``: the parent's at the start, which a child forked from the fork server does
    not inherit (it has the server's). ``unset`` names variables to drop before anything CUDA
    loads (a CUDA_HOME that would break tileiras); doing it here leaves the parent's
    environment untouched."""
    _exit_when_orphaned()
    if os.environ != environment:
        os.environ.clear()
        os.environ.update(environment)
    for name in unset:
        os.environ.pop(name, None)
    # A forked child's NumPy was loaded in the server, its BLAS threads set by the server's
    # environment: the policy again, by the parent's.
    limit_blas_threads()
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        mode, target, args, kwargs = message
        try:
            result = _resolve(target)(*args, **kwargs)
            if mode == "stream":
                for item in result:
                    conn.send(("item", item))
                result = None
        except BaseException as exc:  # report everything; the parent decides what it means
            with contextlib.suppress(OSError):
                conn.send(_error_reply(exc))
            return  # a CUDA error may have poisoned this context: start afresh next time
        conn.send(("ok", result))


class Engine:
    """One supervised child process, started on first use and restarted after a failure.

    ``timeout_s``: how long a request may wait for the child's next reply (``math.inf``: as
    long as the child lives). ``label`` names the engine in error messages."""

    def __init__(
        self,
        timeout_s: float | None = None,
        *,
        name: str = "fmha-gpu-engine",
        label: str = "the GPU engine",
        daemon: bool = True,
    ) -> None:
        self.timeout_s = default_timeout_s() if timeout_s is None else timeout_s
        # A daemonic child may not start children: a job child that runs an engine of its own
        # (a plugin's) is started non-daemonic, and killed at exit instead (see start()).
        self.daemon = daemon
        self.name = name  # the child's process name
        self.label = label  # what the error messages call it
        self._process: mp.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the child now if none is running (a request does it too)."""
        if self._process is not None and self._process.is_alive():
            return
        if self._process is not None:
            self._stop(kill=True)
            self.restarts += 1
        context = _child_context()
        parent, child = context.Pipe()
        unset = ("CUDA_HOME", "CUDA_PATH") if cuda_home_problem() else ()
        process = context.Process(
            target=_serve,
            args=(child, dict(os.environ), unset),
            name=self.name,
            daemon=self.daemon,
        )
        with _main_module_hidden():
            process.start()
        if not self.daemon:  # multiprocessing would wait for it at exit: end it first
            atexit.register(self.kill)
        child.close()  # only the child holds its end: EOF here then means the child is gone
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

    def _receive(self, limit: float) -> tuple[Any, ...] | None:
        """The child's next reply; ``("died",)`` when it is gone, None after ``limit`` s."""
        conn, process = self._conn, self._process
        assert conn is not None and process is not None
        deadline = time.monotonic() + limit if math.isfinite(limit) else math.inf
        try:
            while True:
                wait = min(POLL_S, max(deadline - time.monotonic(), 0.0))
                if conn.poll(wait):
                    return conn.recv()
                if not process.is_alive() and not conn.poll(0):
                    return ("died",)
                if time.monotonic() >= deadline:
                    return None
        except (EOFError, OSError):
            return ("died",)
        except Exception as exc:  # a reply that cannot be unpickled: report it, keep going
            self._stop(kill=True)
            self.restarts += 1
            raise EngineFailure(f"{self.label}'s reply could not be read: {exc}") from exc

    def _send(self, mode: str, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        self.start()
        assert self._conn is not None
        try:
            self._conn.send((mode, target, args, kwargs))
        except (OSError, BrokenPipeError):
            return False
        return True

    def _fail(self, reply: tuple[Any, ...] | None, limit: float) -> EngineFailure:
        """The error a reply other than an item or a result stands for; the child is ended."""
        self.restarts += 1
        if reply is None:
            self._stop(kill=True)
            return EngineFailure(
                f"{self.label} did not answer within {limit:.0f} s (a hang?); it was stopped "
                "and will be restarted for the next run"
            )
        if reply[0] == "error":
            _, kind, text, trace, original = reply
            self._stop(kill=False)
            return EngineFailure(f"{kind}: {text}", original=original, child_traceback=trace)
        code = self._stop(kill=True)
        return EngineFailure(
            f"{self.label} process died (exit code {code}); it will be restarted for the next run",
            died=True,
            exitcode=code,
        )

    def call(self, target: str, *args: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        """Run ``module:function`` in the child and return its result."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        reply = self._receive(limit) if self._send("call", target, args, kwargs) else ("died",)
        if reply is not None and reply[0] == "ok":
            return reply[1]
        raise self._fail(reply, limit)

    def stream(
        self, target: str, *args: Any, timeout_s: float | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """Run the generator function ``module:function`` in the child and yield each value it
        yields, as it comes. ``timeout_s`` bounds the wait for each value. A consumer that
        stops early ends the child (the rest of the stream has nowhere to go)."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        if not self._send("stream", target, args, kwargs):
            raise self._fail(("died",), limit)
        finished = False
        try:
            while True:
                try:
                    reply = self._receive(limit)
                except EngineFailure:
                    finished = True  # the child was ended already
                    raise
                if reply is not None and reply[0] == "item":
                    yield reply[1]
                    continue
                finished = True
                if reply is not None and reply[0] == "ok":
                    return
                raise self._fail(reply, limit)
        finally:
            if not finished:
                self._stop(kill=True)
                self.restarts += 1

    def kill(self) -> None:
        """End the child now, from any thread (the user cancelled a long point): the request
        waiting on it raises EngineFailure, and the next request starts a fresh child."""
        process = self._process
        if process is not None and process.is_alive():
            process.kill()

    def close(self) -> None:
        self._stop(kill=False)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
