"""Issue #51 item 4: Export CSV… runs as a job with progress and Cancel (the window keeps
answering while thousands of runs are written), and a FIFO is refused instead of hanging."""

from __future__ import annotations

import csv
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import TIME_SLACK, StallMeter, seed_run
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from workbench.store import Store

pytestmark = pytest.mark.gui

DOUBLINGS = 12  # 2**12 = 4,096 runs of 2 points: seconds of reading, as 20,000 were for a user


def _many_runs(db: Path) -> int:
    """A database of 2**DOUBLINGS stored runs (one seeded through the store, then copied)."""
    with Store(db) as store:
        seed_run(store, label="many", seq_lens=(64, 128))
    conn = sqlite3.connect(db)
    runs = [c[1] for c in conn.execute("PRAGMA table_info(runs)") if c[1] not in ("id", "uuid")]
    points = [c[1] for c in conn.execute("PRAGMA table_info(points)") if c[1] != "id"]
    for _ in range(DOUBLINGS):
        top = conn.execute("SELECT max(id) FROM runs").fetchone()[0]
        cols = ", ".join(runs)
        conn.execute(
            f"INSERT INTO runs (id, uuid, {cols}) SELECT id + ?, hex(randomblob(16)), {cols} "
            "FROM runs",
            (top,),
        )
        pcols = ", ".join(c for c in points if c != "run_id")
        conn.execute(
            f"INSERT INTO points (run_id, {pcols}) SELECT run_id + ?, {pcols} FROM points",
            (top,),
        )
        conn.commit()
    count = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    conn.close()
    return int(count)


def _cancel_button(window: Any) -> QPushButton:
    dialog = window.history.csv_job.dialog
    assert dialog is not None and dialog.isVisible()
    [button] = [b for b in dialog.findChildren(QPushButton) if b.text() == "Cancel"]
    return button


def test_exporting_thousands_of_runs_keeps_the_window_answering(
    qtbot: Any, make_window: Any, db_path: Path, dialogs: Any, tmp_path: Path
) -> None:
    total = _many_runs(db_path)
    window = make_window(probe_backends=False)
    target = tmp_path / "all.csv"
    dialogs.save_path = str(target)
    meter = StallMeter()
    meter.start()
    started = time.perf_counter()
    window.export_csv_action.trigger()
    answered_s = time.perf_counter() - started
    try:
        assert window.history.csv_job.is_running()
        _cancel_button(window)  # the progress dialog, with Cancel, is up at once
        qtbot.waitUntil(lambda: not window.history.csv_job.is_running(), timeout=120_000)
    finally:
        meter.stop()
    print(f"export of {total} runs: trigger returned in {answered_s * 1e3:.0f} ms, "
          f"longest stall {meter.worst_s * 1e3:.0f} ms")  # fmt: skip
    assert answered_s < 0.25 * TIME_SLACK and meter.worst_s < 0.25 * TIME_SLACK
    with target.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * total and len({r["run_id"] for r in rows}) == total
    assert window.statusBar().currentMessage() == (
        f"Exported {2 * total} points of all runs to {target}"
    )


def test_cancel_in_the_export_dialog_stops_it_and_writes_nothing(
    qtbot: Any, make_window: Any, db_path: Path, dialogs: Any, tmp_path: Path
) -> None:
    _many_runs(db_path)
    window = make_window(probe_backends=False)
    target = tmp_path / "all.csv"
    dialogs.save_path = str(target)
    window.export_csv_action.trigger()
    qtbot.mouseClick(_cancel_button(window), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.history.csv_job.is_running(), timeout=30_000)
    assert not target.exists()
    assert window.statusBar().currentMessage().startswith("Export cancelled: nothing was")
    assert sorted(p.name for p in tmp_path.iterdir() if "all" in p.name) == []


def test_an_export_onto_a_fifo_is_refused_at_once(
    qtbot: Any, make_window: Any, db_path: Path, dialogs: Any, tmp_path: Path
) -> None:
    with Store(db_path) as store:
        seed_run(store, label="one")
    window = make_window(probe_backends=False)
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    dialogs.save_path = str(fifo)
    started = time.perf_counter()
    window.export_csv_action.trigger()
    assert time.perf_counter() - started < 1.0 * TIME_SLACK  # no reader: it would block
    assert not window.history.csv_job.is_running()
    [warning] = dialogs.texts("warning")
    assert warning == (
        f"cannot export to {fifo}: it is not a regular file (a FIFO, a device or a socket); "
        "choose a file"
    )
