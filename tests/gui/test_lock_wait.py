"""Issue #51 item 6: while another process holds the database's write lock, relabelling and
opening wait off the GUI thread (the window keeps answering) and the status bar says so."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import TIME_SLACK, StallMeter, seed_run

from workbench.store import Store

pytestmark = pytest.mark.gui

HOLD_S = 2.5
# A second process takes the write lock, says so, holds it HOLD_S seconds, then lets it go.
HOLD_LOCK = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("COMMIT")
    conn.close()
    """
)


def _hold_lock(db: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(db), str(HOLD_S)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def test_relabel_while_another_process_holds_the_lock_waits_with_the_window_answering(
    qtbot: Any, make_window: Any, db_path: Path, dialogs: Any
) -> None:
    with Store(db_path) as store:
        run_id = seed_run(store, label="before")
    window = make_window(probe_backends=False)
    window.history.select_runs([run_id])
    messages: list[str] = []
    window.statusBar().messageChanged.connect(messages.append)
    dialogs.text_answer = ("after", True)
    holder = _hold_lock(db_path)
    meter = StallMeter()
    meter.start()
    try:
        window.history.relabel_selected()  # as the Relabel… button does
    finally:
        meter.stop()
        holder.wait(timeout=30)
    print(f"relabel under a {HOLD_S} s lock: longest stall {meter.worst_s * 1e3:.0f} ms")
    assert meter.worst_s < 0.25 * TIME_SLACK, meter.long_gaps
    assert f"Waiting for another program to release its lock on {db_path}…" in messages
    assert dialogs.kinds().count("warning") == 0, dialogs.shown
    assert window.store.run(run_id).label == "after"
    assert messages[-1] == "Relabelled 1 run"


def test_the_window_reads_the_store_while_a_relabel_waits_on_the_lock(
    qtbot: Any, make_window: Any, db_path: Path, dialogs: Any
) -> None:
    """A click on a run during the wait loads its points and block map: the waiting write has
    a connection of its own, so a read never meets its statement still in progress."""
    from PySide6.QtCore import QTimer

    with Store(db_path) as store:
        run_id = seed_run(store, label="before", seq_lens=(64, 128, 256))
    window = make_window(probe_backends=False)
    window.history.select_runs([run_id])
    dialogs.text_answer = ("after", True)
    reads: list[object] = []

    def read_as_a_click_would() -> None:
        try:
            reads.append([pt.seq_len for pt in window.store.points(run_id)])
            reads.append(window.store.block_map(run_id, 128) is not None)
        except Exception as exc:  # the old shared connection: "cannot open savepoint"
            reads.append(exc)

    clicks = QTimer()  # a click every few milliseconds, all through the wait
    clicks.timeout.connect(read_as_a_click_would)
    holder = _hold_lock(db_path)
    try:
        clicks.start(2)
        window.history.relabel_selected()
    finally:
        clicks.stop()
        holder.wait(timeout=30)
    failures = [r for r in reads if isinstance(r, Exception)]
    assert not failures, f"{len(failures)} of {len(reads) // 2} reads failed: {failures[0]}"
    assert len(reads) > 20 and set(map(str, reads)) == {"[64, 128, 256]", "True"}, reads[:4]
    assert window.store.run(run_id).label == "after"


def test_opening_a_database_another_process_has_locked_keeps_the_window_answering(
    qtbot: Any, make_window: Any, tmp_path: Path, dialogs: Any
) -> None:
    other = tmp_path / "other.db"
    with Store(other) as store:
        run_id = seed_run(store, label="left running", status="running")
    conn = sqlite3.connect(other)  # its process is gone: no process recorded at all
    conn.execute("UPDATE runs SET machine = '{}' WHERE id = ?", (run_id,))
    conn.commit()
    conn.close()
    window = make_window(probe_backends=False)
    messages: list[str] = []
    window.statusBar().messageChanged.connect(messages.append)
    holder = _hold_lock(other)  # opening must write: the dead process's run is marked failed
    meter = StallMeter()
    meter.start()
    try:
        assert window.database.open(other)
    finally:
        meter.stop()
        holder.wait(timeout=30)
    print(f"open under a {HOLD_S} s lock: longest stall {meter.worst_s * 1e3:.0f} ms")
    assert meter.worst_s < 0.25 * TIME_SLACK, meter.long_gaps
    assert f"Waiting for another program to release its lock on {other}…" in messages
    assert window.history.model.total() == 1
    assert window.store.runs()[0].status == "failed"
