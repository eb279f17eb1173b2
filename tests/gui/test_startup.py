"""Starting the app: within 2 s, through the real entry points, without touching the GPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import assert_within
from PySide6.QtCore import QSettings, QThread
from PySide6.QtWidgets import QApplication
from readouts import row_enabled, row_tooltip

import workbench.backends as backends
from workbench.backends.base import Availability
from workbench.gui import _pyside_fix, app
from workbench.gui.main_window import MainWindow

pytestmark = pytest.mark.gui
ROOT = Path(__file__).resolve().parents[2]

# Runs the real entry point, main(db_path), and reports when its window is visible.
SHOW_AND_QUIT = """
import time
started = time.perf_counter()
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

qapp = QApplication(sys.argv[:1])

def check():
    shown = [w for w in QApplication.topLevelWidgets()
             if type(w).__name__ == "MainWindow" and w.isVisible()]
    if shown:
        print(f"SHOWN {time.perf_counter() - started:.3f}", flush=True)
        shown[0].close()  # the last window closing ends main()
    else:
        QTimer.singleShot(5, check)

QTimer.singleShot(0, check)
if sys.argv[2] == "cli":  # `fmha-workbench --db PATH`: no command opens the window
    from workbench.cli import main as cli_main
    code = cli_main(["--db", sys.argv[1]])
else:
    from workbench.gui.app import main
    code = main(sys.argv[1])
print(f"EXIT {code}", flush=True)
"""


def run_python(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """This Python on ``args`` in a fresh process, offscreen, with its settings in tmp_path."""
    env = dict(os.environ)
    env["QT_QPA_PLATFORM"] = "offscreen"
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # QSettings() lands here, not in ~
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )


def test_the_window_shows_within_two_seconds(
    qtbot: Any, db_path: Path, settings: QSettings
) -> None:
    started = time.perf_counter()
    window = MainWindow(db_path, settings=settings)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    took = time.perf_counter() - started
    window.shutdown()
    assert_within(took, 2.0, "showing the window")


@pytest.mark.parametrize("entry", ["gui-main", "cli"])
def test_main_entry_point_shows_the_window_within_two_seconds_of_process_start(
    tmp_path: Path, entry: str
) -> None:
    done = run_python(tmp_path, "-c", SHOW_AND_QUIT, str(tmp_path / "runs.db"), entry)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    shown = float(lines[lines.index("SHOWN") + 1])
    assert "EXIT" in lines and lines[lines.index("EXIT") + 1] == "0"
    # From the first line of the script: imports, QApplication, the window, the first paint.
    assert_within(shown, 2.0, "main() showing its window after the process started")
    # It remembered the database it used, in the (redirected) user settings.
    config = tmp_path / "config" / "fmha-workbench" / "fmha-workbench.conf"
    assert config.exists() and "runs.db" in config.read_text()


def test_python_dash_m_workbench_gui_has_help(tmp_path: Path) -> None:
    done = run_python(tmp_path, "-m", "workbench.gui", "--help")
    assert done.returncode == 0, done.stderr
    assert "--db" in done.stdout and "workbench" in done.stdout


def test_no_display_is_a_clear_message_not_an_abort(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the check is for X11/Wayland desktops")
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    assert app.main(None) == 2
    assert "no display" in capsys.readouterr().err


def test_backend_picker_and_status_bar_come_from_the_probe(
    qtbot: Any, make_window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe_threads: list[bool] = []

    def statuses() -> dict[str, Availability]:
        # The probe must never run in the GUI thread (GPU detection can take seconds).
        probe_threads.append(QThread.currentThread() is QApplication.instance().thread())
        return {
            "reference": Availability(True, "NumPy reference on the CPU: always available"),
            "cutile": Availability(False, "no NVIDIA driver found: install one to use cuTile"),
            "torch-flash": Availability(True, "torch 2.11 flash on NVIDIA H200"),
        }

    monkeypatch.setattr(backends, "backend_statuses", statuses)
    monkeypatch.setattr(
        backends, "machine_summary", lambda statuses=None: "NVIDIA H200 · cuTile 1.7.0"
    )
    window = make_window()
    qtbot.waitUntil(lambda: bool(window.backend_statuses), timeout=20_000)
    assert probe_threads == [False]
    c = window.controls
    assert c.backends.names() == [
        "reference",
        "cutile",
        "torch-flash",
    ]
    assert row_enabled(c.backends, "reference") and row_enabled(c.backends, "torch-flash")
    assert not row_enabled(c.backends, "cutile")
    assert row_tooltip(c.backends, "cutile") == "no NVIDIA driver found: install one to use cuTile"
    assert window.machine_label.text() == "NVIDIA H200 · cuTile 1.7.0"
    assert "cutile: no NVIDIA driver" in window.machine_label.toolTip()


def test_the_real_probe_reports_this_machine(qtbot: Any, window: Any) -> None:
    assert window.backend_statuses["reference"].available
    text = window.machine_label.text()
    assert text and text != "Probing backends…"
    if not any(s.available for n, s in window.backend_statuses.items() if n != "reference"):
        assert text.startswith("CPU reference")


def test_menus_about_and_quit(qtbot: Any, make_window: Any, dialogs: Any) -> None:
    window = make_window()
    titles = [a.text() for a in window.menuBar().actions()]
    assert titles == ["&File", "&Run", "&Help"]
    about = next(a for a in window.menuBar().actions() if a.text() == "&Help").menu().actions()[0]
    about.trigger()
    assert dialogs.kinds() == ["about"]
    quit_action = next(
        a for a in window.menuBar().actions()[0].menu().actions() if a.text() == "&Quit"
    )
    quit_action.trigger()
    assert not window.isVisible() and window.store is None  # shut down cleanly
    # Anything still queued for the window finds no database, not a closed connection.
    window._on_selection([1, 2])
    assert window.database.block_map(1, 64) is None
    assert window.history.model.rowCount() == 0 and not dialogs.texts("warning")


def test_the_pyside_refcount_guard() -> None:
    """PySide6 6.12.0 on Python < 3.12 drops a reference to None on every void call."""
    from PySide6.QtCore import QObject

    if sys.version_info >= (3, 12):
        assert not _pyside_fix.apply()  # immortal singletons: nothing to do
        return
    if not _pyside_fix.applied():
        assert not _pyside_fix.leaks_none(), "the leak is there but the guard is off"
        return
    probe = QObject()
    for _ in range(200_000):  # would abort the interpreter without the guard
        probe.setObjectName("x")
    assert sys.getrefcount(None) > 1 << 39


def test_processes_the_window_starts_run_one_blas_thread(qapp: Any, monkeypatch: Any) -> None:
    import os

    from workbench.gui.app import BLAS_THREAD_VARIABLES, configure_application

    for name in BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "4")  # a user's own choice is kept
    configure_application(qapp)
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    assert os.environ["OMP_NUM_THREADS"] == "1"
    assert os.environ["MKL_NUM_THREADS"] == "4"
