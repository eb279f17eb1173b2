"""Background work for the window: the sweep worker, the backend probe, and the time-left estimate.

The sweep worker runs either job of :mod:`workbench.gui.sweep_child`: one sweep (a SweepSpec) or a
ladder (a LadderJob: one run per step in one group), on the same two paths.

Both workers are QObjects moved to their own QThread. Their signals must be connected to *bound
methods of QObjects living in the GUI thread* (docs/design.md trap: a lambda or plain function as
the slot would run in the worker thread, even with a queued connection). The runner is the core's
plain generator; the worker only turns its events into signals and its cancel flag into a
callable, so nothing here decides anything about measuring.

Where the sweep computes: a backend that computes in the calling process (the NumPy reference)
runs in a ``spawn`` child that the worker thread supervises (:mod:`workbench.gui.sweep_child`),
because its Python loops would hold the GIL the GUI thread needs to repaint. GPU backends already
compute in the core's engine process, so the worker thread runs their sweep itself.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from workbench.config import SweepSpec
from workbench.gui.sweep_child import LadderJob, LadderStarted, job_events, run_in_child


def computes_in_process(backend: str) -> bool:
    """Would ``run_sweep`` for this backend compute in the calling process?

    The core runs its GPU backends in a supervised engine process; every other backend (the
    reference) computes where it is called.
    """
    import workbench.backends as backends

    return backend not in getattr(backends, "GPU_BACKENDS", frozenset())


def job_backends(job: Any) -> tuple[str, ...]:
    """The backends a job computes on: a group's members, else its one backend."""
    names = getattr(job, "backends", None)
    return tuple(names) if isinstance(names, tuple) else (job.backend,)


class SweepWorker(QObject):
    """Runs one sweep or one ladder for the window: in a child process, or in this worker thread.

    SQLite connections must not cross threads (or processes), so whoever runs the sweep opens
    its own Store on the window's database path and closes it before finishing.
    ``in_child`` forces the choice (tests that patch a backend in this process use False);
    None picks a child process exactly for backends that compute in process.
    """

    ladderStarted = Signal(int, int)  # group_id, steps (a ladder job only, before its steps)
    groupStarted = Signal(int, object, int)  # group_id, run ids, total points (a GroupJob only)
    stepStarted = Signal(int, int, str)  # step index, steps, step name (a ladder job only)
    runStarted = Signal(int, int)  # run_id, total points
    pointStarted = Signal(int, int, int, int)  # run_id, index, total, seq_len
    pointFinished = Signal(object)  # workbench.runner.PointFinished
    runFinished = Signal(int, str, str)  # run_id, status, error ("" when none)
    rejected = Signal(str, str)  # field, message: the core refused the spec before writing
    crashed = Signal(str)  # an exception escaped the runner (locked database, a bug)
    done = Signal()  # always the last signal, whatever happened

    def __init__(
        self,
        spec: SweepSpec | LadderJob,
        db_path: str | Path,
        timing: Any = None,
        *,
        in_child: bool | None = None,
    ) -> None:
        super().__init__()
        self._spec = spec
        self._db_path = db_path
        self._timing = timing
        self._in_child = in_child
        # Events, not a queued signal: the worker thread is busy inside the sweep and would
        # only see a queued cancel after it had ended. One for this process, one for the child.
        self._cancel = threading.Event()
        self._context = multiprocessing.get_context("spawn")
        self._child_cancel = self._context.Event()
        self.child_pid: int | None = None
        self._process: multiprocessing.process.BaseProcess | None = None
        self._run_id: int | None = None
        # Runs of this job started and not yet finished: what a cancel that ends the computing
        # process leaves to be stored as cancelled (a group job may have several at once).
        self._in_flight: set[int] = set()
        self._stopped_runs: set[int] = set()  # in flight when the computing process was ended
        backends = job_backends(spec)
        if in_child is None:
            # A group computes in a child if any member would compute here.
            in_child = any(computes_in_process(b) for b in backends)
        self._in_child = in_child
        # Is there a process to end on cancel: the sweep child, or the GPU engine's child?
        self._ends_process = in_child or not any(computes_in_process(b) for b in backends)

    def request_cancel(self) -> None:
        """Stop the job now (safe to call from any thread): the process computing the current
        point is ended (the sweep child, or the GPU engine's child, which restarts on its next
        call), and every run of the job still in flight is stored as cancelled with the points
        it finished. Where the point computes in this process (tests), it stops after it."""
        self._cancel.set()
        self._child_cancel.set()
        if not self._ends_process:
            return
        self._stopped_runs |= self._in_flight
        if self._in_child:
            process = self._process
            if process is not None:
                with contextlib.suppress(Exception):
                    process.kill()
        else:
            from workbench.backends.isolated import shared_engine

            shared_engine().kill()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    @Slot()
    def run(self) -> None:
        try:
            if self._in_child:
                self._run_in_child()
            else:
                self._run_here()
        except Exception as exc:
            self.crashed.emit("".join(traceback.format_exception_only(type(exc), exc)).strip())
        finally:
            self.done.emit()

    def _emit_event(self, event: Any) -> None:
        # Imported here so importing the GUI does not pull in the runner and its backends
        # before the window shows.
        from workbench.jobs import GroupStarted
        from workbench.ladder import StepStarted
        from workbench.runner import PointFinished, PointStarted, RunFinished, RunStarted

        if isinstance(event, RunStarted):
            self._run_id = event.run_id
            self._in_flight.add(event.run_id)
            if self._cancel.is_set() and self._ends_process:
                self._stopped_runs.add(event.run_id)  # started as the cancel came
            self.runStarted.emit(event.run_id, event.total)
        elif isinstance(event, PointStarted):
            self.pointStarted.emit(event.run_id, event.index, event.total, event.seq_len)
        elif isinstance(event, PointFinished):
            self.pointFinished.emit(event)
        elif isinstance(event, RunFinished):
            self._in_flight.discard(event.run_id)
            if event.run_id in self._stopped_runs:
                # The runner saw its engine ended under it and stored the run failed.
                self._store_cancelled([event.run_id])
                return
            self.runFinished.emit(event.run_id, event.status, event.error or "")
        elif isinstance(event, GroupStarted):
            self.groupStarted.emit(event.group_id, list(event.run_ids), event.total)
        elif isinstance(event, LadderStarted):
            self.ladderStarted.emit(event.group_id, event.steps)
        elif isinstance(event, StepStarted):
            self.stepStarted.emit(event.index, event.total, event.step.name)

    def _store_cancelled(self, run_ids: list[int]) -> None:
        """Store runs whose computing process the cancel ended as cancelled, points kept."""
        from workbench.store import Store

        error = "cancelled by the user; the points finished before that are kept"
        try:
            # Opening the store may first mark a run of the ended sweep child failed
            # ("interrupted"); a cancel is what ended it, so it is overwritten.
            with Store(self._db_path) as store:
                for run_id in run_ids:
                    store.finish_run(run_id, "cancelled", error)
        except Exception as exc:
            error += f" (it could not be stored as cancelled: {exc})"
        for run_id in run_ids:
            self._stopped_runs.discard(run_id)
            self._in_flight.discard(run_id)
            self.runFinished.emit(run_id, "cancelled", "")

    def _run_here(self) -> None:
        from workbench.config import ConfigError
        from workbench.store import Store

        store = None
        try:
            store = Store(self._db_path)
            for event in job_events(self._spec, store, self._cancel.is_set, self._timing):
                self._emit_event(event)
        except ConfigError as exc:
            # The backend's own limits (memory, unsupported knob), checked before anything is
            # written: the window marks the field like any other bad value.
            self.rejected.emit(exc.field, str(exc))
        except Exception as exc:
            self.crashed.emit("".join(traceback.format_exception_only(type(exc), exc)).strip())
        finally:
            if store is not None:
                with contextlib.suppress(Exception):
                    store.close()

    def _run_in_child(self) -> None:
        receiver, sender = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=run_in_child,
            args=(self._spec, str(self._db_path), self._timing, sender, self._child_cancel),
            name="fmha-workbench-sweep",
            daemon=True,  # dies with the GUI; the store then marks the run interrupted
        )
        process.start()
        sender.close()  # only the child writes; EOF then means the child is gone
        self.child_pid = process.pid
        self._process = process
        if self._cancel.is_set():  # cancelled while the child was starting
            process.kill()
        try:
            while True:
                try:
                    if not receiver.poll(0.25):
                        if process.is_alive():
                            continue
                        if not receiver.poll(0):
                            break  # died without a word (killed, segfault, out of memory)
                    message = receiver.recv()
                except (EOFError, OSError):
                    break
                kind = message[0]
                if kind == "event":
                    self._emit_event(message[1])
                elif kind == "rejected":
                    self.rejected.emit(message[1], message[2])
                elif kind == "crashed":
                    self.crashed.emit(message[1])
                elif kind == "done":
                    break
        finally:
            receiver.close()
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
        if self._stopped_runs:
            self._store_cancelled(sorted(self._stopped_runs))
        for run_id in sorted(self._in_flight):  # a group's runs may all be open
            self._child_died(run_id, process.exitcode)

    def _child_died(self, run_id: int, exitcode: int | None) -> None:
        """The child stopped mid-run: keep the run as failed with what it measured."""
        from workbench.store import Store

        how = (
            f"killed by signal {-exitcode}"
            if exitcode and exitcode < 0
            else f"exit code {exitcode}"
        )
        error = (
            f"the sweep process stopped unexpectedly ({how}); "
            "the points measured before that are kept"
        )
        try:
            # Opening the store may already mark the run failed ("interrupted"): its owner
            # process is gone. Either way it ends failed, with the points it measured.
            with Store(self._db_path) as store:
                if store.run(run_id).status == "running":
                    store.finish_run(run_id, "failed", error)
        except Exception as exc:
            error += f" (and it could not be marked failed: {exc})"
        self._in_flight.discard(run_id)
        self.runFinished.emit(run_id, "failed", error)


class ProbeWorker(QObject):
    """Asks the core which backends are usable and what machine this is, off the GUI thread.

    GPU detection can take seconds (driver initialisation, importing CuPy); the window must show
    within 2 s and never touch the GPU itself.
    """

    probed = Signal(object, str)  # dict[str, Availability], machine summary line
    done = Signal()

    @Slot()
    def run(self) -> None:
        statuses: dict[str, Any] = {}
        summary = ""
        try:
            from workbench.backends import backend_statuses, machine_summary

            statuses = backend_statuses()
            summary = machine_summary(statuses)
        except Exception as exc:
            summary = f"Could not probe backends: {exc}"
        self.probed.emit(statuses, summary)
        self.done.emit()


def start_in_thread(worker: SweepWorker | ProbeWorker, parent: QObject) -> QThread:
    """Move ``worker`` to a new QThread owned by ``parent`` and start its ``run`` slot.

    The thread quits when the worker emits ``done``, whoever else listens to ``done`` and in
    whatever order: an owner may wait on the thread from any slot of ``done``.
    """
    thread = QThread(parent)
    worker.moveToThread(thread)
    thread.started.connect(worker.run)
    # Called directly in the worker's thread (quit() is thread-safe), not queued to the GUI
    # thread: a queued quit could sit behind a GUI slot that is itself waiting on the thread,
    # and that wait would never end (seen once in a full test run: a 180 s hang-guard exit).
    worker.done.connect(thread.quit, Qt.ConnectionType.DirectConnection)
    thread.start()
    return thread


class TimeLeft:
    """Estimates the time left in a sweep from the points done so far.

    Each point is modelled as ``a + b·N²``: a fixed cost (warm-up, the minimum timing window,
    launch overhead) plus work that grows with the attention matrix. Fitting both terms
    matters: a reference sweep is dominated by ``b·N²``, a GPU sweep by ``a``, and either
    assumption alone is off by orders of magnitude for the other backend.
    """

    def __init__(self, seq_lens: Sequence[int]) -> None:
        self._seq_lens = list(seq_lens)
        self._done: list[tuple[int, float]] = []

    def add(self, seq_len: int, elapsed_s: float) -> None:
        self._done.append((seq_len, max(float(elapsed_s), 0.0)))

    def _fit(self) -> tuple[float, float]:
        xs = [float(n) ** 2 for n, _ in self._done]
        ys = [t for _, t in self._done]
        count = len(xs)
        if count == 1 or max(xs) == min(xs):
            return sum(ys) / count, 0.0
        mean_x = sum(xs) / count
        mean_y = sum(ys) / count
        sxx = sum((x - mean_x) ** 2 for x in xs)
        sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
        b = sxy / sxx
        a = mean_y - b * mean_x
        # Keep both terms non-negative: a negative one means noise, fall back to the other alone.
        if b < 0:
            return mean_y, 0.0
        if a < 0:
            return 0.0, sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
        return a, b

    def seconds_left(self) -> float | None:
        """None before the first point finishes (nothing to go on)."""
        if not self._done:
            return None
        remaining = self._seq_lens[len(self._done) :]
        a, b = self._fit()
        return sum(a + b * float(n) ** 2 for n in remaining)


def format_duration(seconds: float) -> str:
    """``"4 s"``, ``"2 min 05 s"``, ``"1 h 03 min"``: what a progress bar needs."""
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
