"""Issue #51: trust the window with a database you care about (runs kept after an import,
nothing rewritten by opening, a signalled window's run stored cancelled)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import run_and_wait, small_problem

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
