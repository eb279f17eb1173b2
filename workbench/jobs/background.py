"""Run a job away from the caller, cancellable from any thread: what the window's worker thread
iterates. No Qt here.

Where the job computes: a job on a backend that computes in the calling process (the NumPy
reference) runs whole in an engine child (:meth:`workbench.run.engine.Engine.stream`), because its
Python loops would hold the GIL the window needs for every repaint. A job whose backends all
compute in the GPU engine already runs its loop here and keeps that engine (and its compile
cache) alive across runs.

Cancel ends the process computing the current point (the job's child, or the GPU engine's child,
which restarts on its next call) and every run still open is stored ``cancelled`` with the points
it finished; where the point computes in this process (tests), the job stops after it. A child
that dies otherwise leaves its open runs ``failed`` with how it ended. Either way the stream the
caller sees ends with each open run's RunFinished and the job's JobFinished, as if the job had
ended itself.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.jobs.base import Ending, Timing, computes_in_process
from workbench.run.engine import Engine, EngineFailure
from workbench.run.events import CANCELLED, FAILED, Event, JobFinished, RunFinished, RunStarted
from workbench.store import Store

CHILD_NICENESS = 10
CANCELLED_ERROR = "cancelled by the user; the points finished before that are kept"


def run_in_child(job: Any, db_path: str, timing: Timing) -> Iterator[Event]:
    """In the engine child: the job's events, on a store of its own on the same file."""
    # The desktop stays responsive while the CPU works flat out: the window's repaints (and the
    # user's other programs) go first. Only CPU backends run here, so no GPU timing is affected.
    with contextlib.suppress(AttributeError, OSError):
        os.nice(CHILD_NICENESS)
    with Store(db_path) as store:
        yield from job.run(store, timing=timing)


class BackgroundJob:
    """One job, run where it should compute; :meth:`events` is its stream, :meth:`cancel` may
    be called from any thread.

    SQLite connections must not cross threads (or processes), so whoever runs the job opens its
    own Store on ``db_path``. ``in_child`` forces the choice (tests that patch a backend in this
    process use False); None picks a child exactly when a backend computes in process.
    """

    def __init__(
        self, job: Any, db_path: str | Path, timing: Timing = None, *, in_child: bool | None = None
    ) -> None:
        self.job = job
        self.db_path = str(db_path)
        self.timing = timing
        local = [computes_in_process(name) for name in job.backends]
        self.in_child = any(local) if in_child is None else in_child
        # Is there a process to end on cancel: the job's child, or the GPU engine's child?
        self.ends_process = self.in_child or not any(local)
        self._cancel = threading.Event()
        self._engine: Engine | None = None
        self._store: Store | None = None
        self._open: dict[int, None] = {}  # runs started and not yet finished, in order
        self.child_pid: int | None = None

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        self._cancel.set()
        if not self.ends_process:
            return
        if self.in_child:
            engine = self._engine
            if engine is not None:
                engine.kill()
        else:
            from workbench.backends.isolated import shared_engine

            shared_engine().kill()

    def events(self) -> Iterator[Event]:
        """The job's events, ending with its JobFinished. Raises the job's refusal (a
        ConfigError) before anything is written, and what else escapes the job."""
        ending = Ending()
        source = self._in_child() if self.in_child else self._here()
        try:
            for event in source:
                if isinstance(event, JobFinished):
                    continue  # said below, with what a cancel changed
                event = self._track(event)
                ending.see(event)
                yield event
        finally:
            if self._store is not None:
                with contextlib.suppress(Exception):
                    self._store.close()
                self._store = None
        if ending.started is not None:
            yield ending.finished(self.cancel_requested)

    def _track(self, event: Event) -> Event:
        if isinstance(event, RunStarted):
            self._open[event.run_id] = None
        elif isinstance(event, RunFinished):
            self._open.pop(event.run_id, None)
            if event.status == FAILED and self.cancel_requested and self.ends_process:
                # The cancel ended the process under the runner, which stored the run failed.
                self._writer().finish_run(event.run_id, CANCELLED, CANCELLED_ERROR)
                return RunFinished(event.run_id, CANCELLED, CANCELLED_ERROR)
        return event

    def _writer(self) -> Store:
        if self._store is None:
            self._store = Store(self.db_path)
        return self._store

    def _here(self) -> Iterator[Event]:
        store = self._writer()
        yield from self.job.run(store, timing=self.timing, cancel=self._cancel.is_set)

    def _in_child(self) -> Iterator[Event]:
        # Not daemonic: a plugin's backend in this job starts an engine child of its own.
        engine = Engine(math.inf, name="fmha-workbench-sweep", label="the sweep", daemon=False)
        self._engine = engine
        engine.start()
        self.child_pid = engine.pid
        if self.cancel_requested:  # cancelled while the child was starting
            engine.kill()
        exitcode: int | None = None
        try:
            yield from engine.stream(
                "workbench.jobs.background:run_in_child", self.job, self.db_path, self.timing
            )
        except EngineFailure as exc:
            if not exc.died:
                raise exc.original if isinstance(exc.original, Exception) else exc from None
            exitcode = exc.exitcode
        finally:
            engine.close()
        for run_id in list(self._open):  # the child ended with these runs open
            yield self._end_open_run(run_id, exitcode)

    def _end_open_run(self, run_id: int, exitcode: int | None) -> RunFinished:
        if self.cancel_requested:
            status, error = CANCELLED, CANCELLED_ERROR
        else:
            how = (
                f"killed by signal {-exitcode}"
                if exitcode and exitcode < 0
                else f"exit code {exitcode}"
            )
            status = FAILED
            error = (
                f"the sweep process stopped unexpectedly ({how}); the points measured before "
                "that are kept"
            )
        try:
            # Opening the store marks the run failed ("interrupted") first: its owner is gone.
            store = self._writer()
            stored = store.run(run_id)
            if stored.status == "running" or (stored.error or "").startswith("interrupted"):
                store.finish_run(run_id, status, error)
        except Exception as exc:
            error += f" (and it could not be stored so: {exc})"
        return RunFinished(run_id, status, error)
