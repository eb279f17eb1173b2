"""Issue #51 item 3: a window ended by SIGTERM or SIGHUP stores its running sweep as cancelled
with the points it finished, as the command line does; driven through a real second process
running ``workbench.gui.app.main``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from workbench.store import Store

pytestmark = pytest.mark.gui

# The window's own main(), with the form set and Run sweep triggered once it is up.
WINDOW_SCRIPT = textwrap.dedent(
    """
    import sys
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    from workbench.gui import app as gui_app

    if __name__ == "__main__":
        application = QApplication(sys.argv[:1])

        def start_sweep() -> None:
            window = next(w for w in application.topLevelWidgets() if hasattr(w, "jobs"))
            c = window.controls
            c.batch.setValue(1)
            c.heads.setValue(2)
            c.seq_lens.setText(",".join(str(64 * k) for k in range(1, 40)))
            window.run_action.trigger()
            print("started", window.jobs.is_running(), flush=True)

        QTimer.singleShot(500, start_sweep)
        sys.exit(gui_app.main(sys.argv[1]))
    """
)


def _points_stored(db: Path) -> int:
    if not db.exists():
        return 0
    with Store(db, read_only=True) as store:
        runs = store.runs()
        return len(store.points(runs[0].id)) if runs else 0


@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_window_ended_by_a_signal_stores_its_running_sweep_as_cancelled(
    tmp_path: Path, ending: int
) -> None:
    db = tmp_path / "runs.db"
    script = tmp_path / "window.py"
    script.write_text(WINDOW_SCRIPT)
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    window = subprocess.Popen(
        [sys.executable, str(script), str(db)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while _points_stored(db) < 2:
            assert window.poll() is None, window.communicate()[0]
            assert time.monotonic() < deadline, "the window's sweep stored no points"
            time.sleep(0.2)
        window.send_signal(ending)
        output, _ = window.communicate(timeout=30)
    finally:
        if window.poll() is None:
            window.kill()
            window.wait()
    assert "started True" in output, output
    with Store(db, read_only=True) as store:
        run = store.runs()[0]
        assert run.status == "cancelled", (run.status, output)
        assert 2 <= len(store.points(run.id)) < len(run.seq_lens)
