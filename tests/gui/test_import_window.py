"""File › Import runs…: another machine's runs in the open database, History's machine filter,
and Compare naming the machines (issue 39, item 9)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import run_and_wait, small_problem

pytestmark = pytest.mark.gui

H200_DB = Path(__file__).resolve().parents[2] / "bench" / "results" / "h200.db"


def import_through_menu(window: Any, dialogs: Any, path: Path) -> None:
    dialogs.save_path = str(path)  # what the file dialog "chooses"
    window.import_action.trigger()


def test_import_runs_twice_from_the_menu_then_filter_and_compare_by_machine(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    other = tmp_path / "lab-h200.db"
    shutil.copy(H200_DB, other)
    small_problem(qtbot, window, seq_lens="64,128")
    local = run_and_wait(qtbot, window)
    history = window.history
    assert not history.machine_filter.isVisible()  # one machine: nothing to filter

    import_through_menu(window, dialogs, other)
    assert window.statusBar().currentMessage() == (f"Imported 16 runs in 4 new groups from {other}")
    assert history.model.total() == 17
    assert sorted(history.selected_ids()) == list(range(local + 1, local + 17))
    import_through_menu(window, dialogs, other)  # again: nothing new
    assert "imported 0 runs" in window.statusBar().currentMessage().lower()
    assert history.model.total() == 17 and dialogs.kinds().count("warning") == 0

    # History: one machine's runs, then all again.
    assert history.machine_filter.isVisible()
    history.machine_filter.setCurrentIndex(history.machine_filter.findData("NVIDIA H200 on vm"))
    assert history.model.total() == 16
    assert {history.model.run_at(r).backend for r in range(16)} >= {"cutile", "fa4"}
    history.machine_filter.setCurrentIndex(0)  # all machines
    assert history.model.total() == 17
    # Another database while a machine is picked: its own runs, all shown, no error.
    history.machine_filter.setCurrentIndex(history.machine_filter.findData("NVIDIA H200 on vm"))
    path = window.store.path
    assert window.database.open(other)
    assert history.model.total() == 16 and not history.machine_filter.isVisible()
    assert dialogs.kinds().count("warning") == 0, dialogs.shown
    assert window.database.open(path)
    assert history.machine_filter.currentIndex() == 0 and history.model.total() == 17

    # Compare: an imported H200 run against the local reference run names both machines.
    imported = next(
        history.model.run_at(r).id
        for r in range(history.model.rowCount())
        if history.model.run_at(r).backend == "cutile"
    )
    history.select_runs([local, imported])
    window.tabs.setCurrentWidget(window.compare)
    qtbot.waitUntil(lambda: len(window.compare.rows) > 0 or "Careful" in window.compare.hint.text())
    hint = window.compare.hint.text()
    assert "different machines" in hint and "NVIDIA H200 on vm" in hint


def test_a_file_that_is_not_a_run_database_is_refused_with_a_warning(
    window: Any, dialogs: Any, tmp_path: Path
) -> None:
    other = tmp_path / "notes.db"
    other.write_text("not a database")
    before = window.history.model.total()
    import_through_menu(window, dialogs, other)
    assert dialogs.kinds()[-1] == "warning"
    assert "not a run database" in dialogs.texts("warning")[-1]
    assert window.history.model.total() == before


def test_importing_more_runs_than_are_plotted_keeps_the_imports_line_in_the_status_bar(
    qtbot: Any, make_window: Any, dialogs: Any, tmp_path: Path
) -> None:
    """The README's step 6: 36 H200 runs come in and are selected; the note that only 12 are
    plotted joins the import's line instead of replacing it (a new user saw only the note)."""
    other = tmp_path / "h200-prefill.db"
    shutil.copy(H200_DB.with_name("h200-prefill.db"), other)
    window = make_window(probe_backends=False)
    import_through_menu(window, dialogs, other)
    bar = window.statusBar()
    qtbot.waitUntil(lambda: "plotting" in bar.currentMessage())
    assert bar.currentMessage() == (
        f"Imported 36 runs in 12 new groups from {other}; with the measured ceilings of "
        "NVIDIA H200; plotting the first 12 of 36 selected runs"
    )
    window.history.select_runs(list(range(1, 15)))  # a later selection: the note alone
    qtbot.waitUntil(lambda: bar.currentMessage() == "Plotting the first 12 of 14 selected runs")
