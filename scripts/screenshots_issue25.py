"""Screenshots of issue 25's rough edges after the fix, into docs/screenshots/.

    QT_QPA_PLATFORM=offscreen python scripts/screenshots_issue25.py [--out DIR]

Uses a temporary database and settings. Window views are grabbed from the real window; the
CLI's output is rendered as a terminal-style image, so every item has a picture.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--heads", "1", "--head-dim", "32", "--warmup", "0", "--samples", "3", "--min-time", "0"]


def cli(*argv: str) -> str:
    """``fmha-workbench argv`` in this process: what a terminal would show (stdout, stderr)."""
    from workbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    shown = " ".join(a if " " not in a else repr(a) for a in argv)
    return f"$ fmha-workbench {shown}\n{out.getvalue()}{err.getvalue()}(exit {code})\n"


def settle(app: Any, seconds: float = 0.3) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


def wait(app: Any, condition: Any, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("screenshots: timed out")
        app.processEvents()
        time.sleep(0.01)


def save(widget: Any, path: Path) -> None:
    if not widget.grab().save(str(path), "PNG", 0):
        raise SystemExit(f"could not write {path}")
    print(f"saved {path.relative_to(ROOT)} ({path.stat().st_size / 1024:.0f} KB)")


def terminal(app: Any, text: str, path: Path) -> None:
    from PySide6.QtGui import QFont
    from PySide6.QtWidgets import QLabel

    label = QLabel(text.rstrip())
    font = QFont("DejaVu Sans Mono")
    font.setStyleHint(QFont.StyleHint.Monospace)
    font.setPointSize(9)
    label.setFont(font)
    label.setStyleSheet("background: #1e1e1e; color: #e6e6e6; padding: 10px;")
    label.adjustSize()
    label.show()
    settle(app, 0.1)
    save(label, path)
    label.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication, QMessageBox

    from workbench.gui.app import configure_application
    from workbench.gui.main_window import MainWindow
    from workbench.timing import TimingSettings

    app = QApplication(sys.argv[:1])
    configure_application(app)
    # A dialog would wait for a click nobody gives: the notices go to the status bar only.
    QMessageBox.warning = staticmethod(lambda *a, **k: QMessageBox.StandardButton.Ok)
    with tempfile.TemporaryDirectory(prefix="fmha-shots-") as tmp:
        db = Path(tmp) / "runs.db"
        os.environ["FMHA_WORKBENCH_DB"] = str(db)

        # CLI: one unit spelling in the ladder table; the --mask window message.
        text = cli("ladder", "--seq-lens", "64,128", *FAST)
        text += "\n" + cli("sweep", "--mask", "window", "--seq-lens", "64", *FAST)
        terminal(app, text, out / "cli-ladder-units-and-window-message.png")
        # setup.sh: the wheel build's metadata, and that its log has no license deprecation.
        build = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", tmp, str(ROOT)],
            capture_output=True,
            text=True,
            check=False,
        )
        log = build.stdout + build.stderr
        warned = [line for line in log.splitlines() if "license" in line.lower()]
        text = (
            "$ python -m pip wheel -v --no-deps .   (what setup.sh's pip install runs)\n"
            f"exit {build.returncode}; lines of the build log that mention 'license': "
            f"{len(warned)}\n" + "\n".join(warned[:5])
        )
        terminal(app, text, out / "setup-license-no-deprecation.png")

        settings = QSettings(os.path.join(tmp, "settings.ini"), QSettings.Format.IniFormat)
        timing = TimingSettings(warmup=1, min_samples=5, min_time_s=0.0)
        window = MainWindow(db, settings=settings, timing=timing)
        window.show()
        wait(app, lambda: bool(window.backend_statuses), 30)

        # The empty block map, before anything is selected.
        window.resize(1024, 700)
        window.history.select_runs([])
        window.tabs.setCurrentWidget(window.heatmap)
        settle(app)
        save(window.heatmap, out / "blockmap-empty.png")

        ids = []
        c = window.controls
        for seq, label in (("64,128,256,512", "to 512"), ("64,128,256", "to 256")):
            c.batch.setValue(1)
            c.heads.setValue(2)
            c.head_dim.setCurrentIndex(c.head_dim.findData(32))
            c.seq_lens.setText(seq)
            c.mask.setCurrentIndex(c.mask.findData("causal"))
            c.tile_m.setCurrentIndex(c.tile_m.findData(32))
            c.tile_n.setCurrentIndex(c.tile_n.findData(32))
            c.label.setText(label)
            c.run_button.click()
            wait(app, lambda: not window.is_running())
            ids.append(window.last_run_id)

        # A small map (64 / 32 = 2 × 2 blocks): whole-block ticks.
        window.history.select_runs([ids[1]])
        window.tabs.setCurrentWidget(window.heatmap)
        wait(app, lambda: window.heatmap.current_grid() is not None)
        window.heatmap.select_seq_len(64)
        settle(app)
        save(window.heatmap, out / "blockmap-small-integer-ticks.png")

        # The throughput legend below its plot; then the readout after a new selection.
        window.resize(1440, 900)
        window.history.select_runs(ids)
        window.tabs.setCurrentWidget(window.plots)
        wait(app, lambda: len(window.plots.run_ids()) == 2)
        settle(app)
        save(window.plots, out / "plots-throughput-legend-outside.png")
        window.history.select_runs([ids[0]])
        wait(app, lambda: window.plots.run_ids() == [ids[0]])
        window.plots.show_readout_at(math.log2(512))
        window.history.select_runs([ids[1]])
        wait(app, lambda: window.plots.run_ids() == [ids[1]])
        settle(app)
        save(window.plots, out / "plots-readout-not-stale.png")

        # Whole windows: Run and Cancel in view at 1024×700, History's rows at 1440×900.
        window.statusBar().clearMessage()
        for width, height in ((1024, 700), (1440, 900)):
            window.resize(width, height)
            settle(app)
            save(window, out / f"window-{width}x{height}.png")

        # A damaged database: the status message and the backend line apart.
        damaged = Path(tmp) / "damaged.db"
        damaged.write_bytes(b"not a database, " * 512)
        window.resize(1024, 700)
        window.open_database(damaged)
        settle(app, 0.5)
        bar = window.statusBar()
        save(bar, out / "statusbar-damaged-database.png")
        window.shutdown()
    return 0


if __name__ == "__main__":  # the sweep child re-imports this file: keep the guard
    sys.exit(main(sys.argv[1:]))
