"""Issue #51: trust the window with a database you care about (runs kept after an import,
nothing rewritten by opening, a signalled window's run stored cancelled)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import run_and_wait, small_problem

from workbench.store import SCHEMA_VERSION

pytestmark = pytest.mark.gui

H200_DB = Path(__file__).resolve().parents[2] / "bench" / "results" / "h200.db"


def test_a_sweep_after_importing_into_a_fresh_database_shows_in_history(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    other = tmp_path / "lab.db"
    shutil.copy(H200_DB, other)
    dialogs.save_path = str(other)
    window.import_action.trigger()
    assert window.history.model.total() == 16
    small_problem(qtbot, window, seq_lens="128")
    run_id = run_and_wait(qtbot, window)
    qtbot.waitUntil(lambda: window.history.model.row_of(run_id) is not None, timeout=5000)
    assert window.history.model.total() == 17
    assert dialogs.kinds().count("warning") == 0, dialogs.shown
    assert window.store.run(run_id).status == "complete"


def _user_version(path: Path) -> int:
    conn = sqlite3.connect(path)  # an ordinary reader: it sees what a writer has in the -wal
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_opening_an_older_database_and_quitting_leaves_it_byte_identical(
    qtbot: Any, make_window: Any, dialogs: Any, tmp_path: Path
) -> None:
    committed = tmp_path / "h200.db"
    shutil.copy(H200_DB, committed)
    before = committed.read_bytes()
    assert _user_version(committed) < SCHEMA_VERSION
    window = make_window(committed)
    assert window.history.model.total() == 16  # read as it is
    assert "older schema" in window.statusBar().currentMessage()
    assert window.upgrade_action.isEnabled() and window.controls.run_button.isEnabled()
    window.close()  # File › Quit
    assert committed.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("h200")) == ["h200.db"]
    assert dialogs.kinds().count("warning") == 0, dialogs.shown


def test_a_sweep_into_an_older_database_upgrades_it_and_says_so(
    qtbot: Any, make_window: Any, dialogs: Any, tmp_path: Path
) -> None:
    older = tmp_path / "h200.db"
    shutil.copy(H200_DB, older)
    window = make_window(older)
    qtbot.waitUntil(lambda: bool(window.backend_statuses), timeout=20_000)
    small_problem(qtbot, window, seq_lens="64")
    messages: list[str] = []
    window.statusBar().messageChanged.connect(messages.append)
    run_id = run_and_wait(qtbot, window)
    upgraded = f"Upgraded {older} from schema 2 to {SCHEMA_VERSION}"
    assert any(m.startswith(upgraded) for m in messages), messages
    assert _user_version(older) == SCHEMA_VERSION
    assert window.store.run(run_id).status == "complete" and window.history.model.total() == 17
    assert not window.upgrade_action.isEnabled()


def test_file_upgrade_database_upgrades_an_older_one_on_request(
    qtbot: Any, make_window: Any, dialogs: Any, tmp_path: Path
) -> None:
    older = tmp_path / "h200.db"
    shutil.copy(H200_DB, older)
    window = make_window(older)
    window.upgrade_action.trigger()
    assert window.statusBar().currentMessage().startswith(f"Upgraded {older} from schema 2")
    assert _user_version(older) == SCHEMA_VERSION and not window.store.read_only
    assert window.history.model.total() == 16 and not window.upgrade_action.isEnabled()
