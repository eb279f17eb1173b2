"""Background work for the window: the job worker and the backend probe, each a QObject moved to
its own QThread.

Their signals must be connected to *bound methods of QObjects living in the GUI thread*
(docs/design.md trap: a lambda or plain function as the slot would run in the worker thread, even
with a queued connection). The job is the core's: a :class:`workbench.jobs.BackgroundJob` decides
where it computes (an engine child for backends that compute in process) and what a cancel does;
the worker only turns its stream into signals, so nothing here decides anything about measuring.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot


class SweepWorker(QObject):
    """Runs one job (a sweep, a group or a ladder: :mod:`workbench.jobs`) for the window.

    ``in_child`` forces where it computes (tests that patch a backend in this process use
    False); None lets the core pick a child process exactly for backends that compute in
    process.
    """

    # Each event of the job's stream (workbench.run.events), in order; it shadows QObject.event.
    event: Signal = Signal(object)  # type: ignore[assignment]
    rejected = Signal(object)  # the job's ConfigError: refused before anything was written
    crashed = Signal(str)  # an exception escaped the job (a locked database, a bug)
    done = Signal()  # always the last signal, whatever happened

    def __init__(
        self,
        job: Any,
        db_path: str | Path,
        timing: Any = None,
        *,
        in_child: bool | None = None,
    ) -> None:
        super().__init__()
        # Imported here so importing the GUI does not pull in the jobs and their backends
        # before the window shows.
        from workbench.jobs import BackgroundJob

        self.job = BackgroundJob(job, db_path, timing, in_child=in_child)

    def request_cancel(self) -> None:
        """Stop the job now; safe to call from any thread (see BackgroundJob.cancel)."""
        self.job.cancel()

    @property
    def cancel_requested(self) -> bool:
        return self.job.cancel_requested

    @property
    def child_pid(self) -> int | None:
        """The process computing the job, when it runs in a child."""
        return self.job.child_pid

    @Slot()
    def run(self) -> None:
        from workbench.config import ConfigError

        try:
            for event in self.job.events():
                self.event.emit(event)
        except ConfigError as exc:
            # The backend's own limits (memory, unsupported knob), checked before anything is
            # written: the window marks the field like any other bad value.
            self.rejected.emit(exc)
        except Exception as exc:
            self.crashed.emit("".join(traceback.format_exception_only(type(exc), exc)).strip())
        finally:
            self.done.emit()


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
    # and that wait would never end.
    worker.done.connect(thread.quit, Qt.ConnectionType.DirectConnection)
    thread.start()
    return thread
