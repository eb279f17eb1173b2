"""Application setup and the entry point ``main(db_path) -> int`` that ``fmha-workbench`` calls."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

from workbench.gui import _pyside_fix

ORGANIZATION = "fmha-workbench"
APPLICATION = "fmha-workbench"


def display_problem() -> str | None:
    """Why Qt could not open a window here, or None. Qt aborts the process instead of raising."""
    if sys.platform.startswith("linux") and not os.environ.get("QT_QPA_PLATFORM"):
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            return (
                "no display found (DISPLAY and WAYLAND_DISPLAY are unset); run it on a desktop, "
                "through ssh -X, under xvfb-run, or use the command line: fmha-workbench --help"
            )
    return None


def configure_application(app: QApplication) -> None:
    """Names for QSettings, the pyqtgraph options every view expects, the PySide6 guard."""
    _pyside_fix.apply()
    limit_child_blas_threads()
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName("FMHA Workbench")
    # Row-major images read like the attention matrix (row = q-block); see docs/design.md.
    pg.setConfigOptions(
        imageAxisOrder="row-major", antialias=True, background="w", foreground="#222"
    )


# Read by NumPy's BLAS when a process loads it. The window's own NumPy is loaded already; the
# sweep and engine processes it spawns inherit these and run one BLAS thread each.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def limit_child_blas_threads() -> None:
    """One BLAS thread in the processes the window starts, unless the user chose otherwise.

    A reference sweep's child runs at lower priority, but with one BLAS thread per core it
    still took the core the window needs and stalled its event loop. Set here, at start-up in
    the main thread, because changing the environment while other threads run is not safe.
    """
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


class _Waker(QObject):
    """Python delivers a pending Ctrl+C only when it runs bytecode; this tick gives it a turn."""

    def tick(self) -> None:
        pass


def main(db_path: str | None = None) -> int:
    """Open the workbench on ``db_path`` (None: the last database used, else the default)."""
    problem = display_problem()
    if problem:
        print(f"fmha-workbench: {problem}", file=sys.stderr)
        return 2

    from workbench.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    configure_application(app)
    window = MainWindow(Path(db_path) if db_path else None)
    window.show()

    # Ctrl+C in the terminal: close properly (settings saved, a running sweep kept as cancelled).
    def on_sigint(signum: int, frame: object) -> None:
        window.shutdown()
        app.quit()

    previous = signal.signal(signal.SIGINT, on_sigint)
    waker = _Waker()
    wake = QTimer()
    wake.timeout.connect(waker.tick)
    wake.start(250)
    try:
        return int(app.exec())
    finally:
        wake.stop()
        signal.signal(signal.SIGINT, previous)
