"""Which database the window opens (issue 25, items 1 and 2): the path given, else
FMHA_WORKBENCH_DB, else the last one used; and it asks before creating a missing folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMessageBox

from workbench.store import Store

pytestmark = pytest.mark.gui


def test_the_environment_variable_wins_over_the_remembered_database(
    make_window: Any, settings: QSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remembered, chosen = tmp_path / "remembered.db", tmp_path / "chosen.db"
    Store(remembered).close()
    settings.setValue("db_path", str(remembered))
    monkeypatch.setenv("FMHA_WORKBENCH_DB", str(chosen))
    window = make_window(None)
    assert window.store.path == chosen
    monkeypatch.delenv("FMHA_WORKBENCH_DB")
    assert make_window(None).store.path == remembered  # without it: the last one used


@pytest.mark.parametrize("answer", ["yes", "no"])
def test_the_window_asks_before_creating_a_missing_folder(
    answer: str, make_window: Any, dialogs: Any, tmp_path: Path
) -> None:
    target = tmp_path / "new" / "place" / "runs.db"
    dialogs.question_answer = (
        QMessageBox.StandardButton.Yes if answer == "yes" else QMessageBox.StandardButton.No
    )
    window = make_window(target)
    (kind, _title, text) = dialogs.shown[0]
    assert kind == "question" and str(target.parent) in text
    if answer == "yes":
        assert window.store is not None and window.store.path == target and target.exists()
        assert window.controls.run_button.isEnabled()
    else:
        assert window.store is None and not (tmp_path / "new").exists()
        assert not window.controls.run_button.isEnabled()


def test_an_existing_folder_is_used_without_a_question(
    make_window: Any, dialogs: Any, tmp_path: Path
) -> None:
    target = tmp_path / "fresh.db"
    window = make_window(target)
    assert window.store.path == target and "question" not in dialogs.kinds()


def test_a_db_before_no_command_reaches_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import workbench.gui.app as app
    from workbench.cli import main

    opened: list[str | None] = []
    monkeypatch.setattr(app, "main", lambda db: opened.append(db) or 0)
    assert main(["--db", str(tmp_path / "x.db")]) == 0
    assert main(["gui", "--db", str(tmp_path / "y.db")]) == 0
    assert opened == [str(tmp_path / "x.db"), str(tmp_path / "y.db")]
