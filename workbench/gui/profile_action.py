"""Profile the point on show with Nsight Compute: the window's twin of ``fmha-workbench profile``.

A button beside the Block map's length picker: it profiles the run and length the map shows
(:func:`workbench.reports.ncu.profile_point`, one launch under ``ncu --clock-control none``) in a
worker thread, and hands the metrics back to the window, which stores them with the point (the GUI
thread owns the database connection). Where it cannot work, the button is greyed out and its
tooltip says why: no ``ncu`` on PATH, a CPU run, no point shown, a profile already running.
A refusal that only ncu can find (no permission to read the counters) comes back as text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal, Slot
from PySide6.QtWidgets import QPushButton, QWidget

from workbench.analysis.roofline import ran_on_the_cpu
from workbench.reports.ncu import ProfileRefused, check_ncu, profile_point

READY_TIP = (
    "Profile this run's launch at this length with Nsight Compute (one launch, clocks left "
    "as they are) and keep its headline metrics with the point; Compare shows two side by side"
)


class _ProfileWorker(QObject):
    finished = Signal(int, int, object, str)  # run id, N, metrics dict or None, refusal text

    @Slot(object, object, object)
    def profile(self, run: Any, point: Any, db_path: Any) -> None:
        try:
            metrics = profile_point(run, point, Path(db_path)).to_dict()
            self.finished.emit(run.id, point.seq_len, metrics, "")
        except ProfileRefused as exc:
            self.finished.emit(run.id, point.seq_len, None, str(exc))
        except Exception as exc:  # never into the window as a traceback: a line of text
            self.finished.emit(run.id, point.seq_len, None, f"{type(exc).__name__}: {exc}")


class ProfilePointButton(QPushButton):
    """``Profile`` (with Nsight Compute); ``profiled`` carries the metrics or the refusal."""

    _start = Signal(object, object, object)
    profiled = Signal(int, int, object, str)  # run id, N, metrics dict or None, refusal text

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Profile", parent)  # short: the Block map's bar is narrow
        self.setObjectName("profile_point")
        self._run: Any = None
        self._point: Any = None
        self._db_path: Path | None = None
        self._busy = False
        self._thread = QThread(self)
        self._worker = _ProfileWorker()
        self._worker.moveToThread(self._thread)
        self._start.connect(self._worker.profile)
        self._worker.finished.connect(self._on_finished)
        self._thread.start()
        self.clicked.connect(self._on_clicked)
        self.set_point(None, None, None)

    def set_point(self, run: Any, point: Any, db_path: Path | None) -> None:
        """The run and point the map shows (None: none) and the database they live in."""
        self._run, self._point, self._db_path = run, point, db_path
        self._update()

    def why_not(self) -> str | None:
        """Why the button is greyed out, or None when it can profile."""
        if self._busy:
            return "a profile is running"
        missing = check_ncu()
        if missing:
            return missing
        if self._run is None or self._point is None or self._db_path is None:
            return "show a run's point in the Block map to profile it"
        if ran_on_the_cpu(self._run.backend, self._run.machine):
            return (
                f"this run ran on the CPU ({self._run.backend} backend): Nsight Compute "
                "profiles GPU runs"
            )
        return None

    def _update(self) -> None:
        why = self.why_not()
        self.setEnabled(why is None)
        self.setToolTip(READY_TIP if why is None else f"Cannot profile: {why}")

    def _on_clicked(self) -> None:
        if self.why_not() is not None:
            return
        self._busy = True
        self._update()
        self._start.emit(self._run, self._point, self._db_path)

    @Slot(int, int, object, str)
    def _on_finished(self, run_id: int, seq_len: int, metrics: Any, refusal: str) -> None:
        self._busy = False
        self._update()
        self.profiled.emit(run_id, seq_len, metrics, refusal)

    def shutdown(self) -> None:
        self._thread.quit()
        self._thread.wait()
