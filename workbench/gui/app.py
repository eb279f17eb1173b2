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
from workbench.measure.blas import BLAS_THREAD_VARIABLES, limit_blas_threads

__all__ = ["BLAS_THREAD_VARIABLES", "configure_application", "display_problem", "main"]

ORGANIZATION = "fmha-workbench"
APPLICATION = "fmha-workbench"
# The signals that end the window as its Quit does (the CLI stores `cancelled` for them too).
QUIT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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
    limit_blas_threads()  # the policy the command line follows too (workbench.measure.blas)
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName("FMHA Workbench")
    # Row-major images read like the attention matrix (row = q-block); see docs/design.md.
    pg.setConfigOptions(
        imageAxisOrder="row-major", antialias=True, background="w", foreground="#222"
    )


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

    # Ctrl+C in the terminal, `kill` (SIGTERM) or a closed terminal (SIGHUP): close properly
    # (settings saved, a running sweep stored as cancelled), as the command line does.
    def on_signal(signum: int, frame: object) -> None:
        window.shutdown()
        app.quit()

    previous = {number: signal.signal(number, on_signal) for number in QUIT_SIGNALS}
    # A session manager's logout quits the application without closing the window first.
    app.aboutToQuit.connect(window.shutdown)
    waker = _Waker()
    wake = QTimer()
    wake.timeout.connect(waker.tick)
    wake.start(250)
    try:
        return int(app.exec())
    finally:
        wake.stop()
        for number, handler in previous.items():
            signal.signal(number, handler)
