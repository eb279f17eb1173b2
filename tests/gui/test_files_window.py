"""Issue 38 in the window: an export asks before replacing a file the save dialog did not name,
never writes onto the database, neutralises formula cells; labels are capped as at the CLI."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import export_and_wait, seed_run
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from workbench.config import MAX_LABEL_CHARS
from workbench.store import Store

pytestmark = pytest.mark.gui
YES, NO = QMessageBox.StandardButton.Yes, QMessageBox.StandardButton.No
FORMULA = '=HYPERLINK("http://evil.example","click")'


@pytest.fixture
def window(qtbot: Any, make_window: Any, db_path: Path) -> Any:
    with Store(db_path) as store:
        run_id = seed_run(store, label=FORMULA, seq_lens=(64, 128))
    made = make_window()
    made.history.select_runs([run_id])
    qtbot.waitUntil(lambda: made.plots.run_ids() == [run_id])
    return made


def test_a_csv_export_asks_before_replacing_the_file_it_added_csv_to(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    existing = tmp_path / "report.csv"
    existing.write_text("my own report\n")
    dialogs.save_path = str(tmp_path / "report")  # the window adds .csv
    dialogs.question_answer = NO
    export_and_wait(qtbot, window)
    assert existing.read_text() == "my own report\n"
    [asked] = [text for kind, _, text in dialogs.shown if kind == "question"]
    assert str(existing) in asked and "Replace" in asked

    dialogs.question_answer = YES
    export_and_wait(qtbot, window)
    rows = list(csv.DictReader(existing.open(encoding="utf-8", newline="")))
    assert [r["label"] for r in rows] == ["'" + FORMULA] * 2  # and neutralised, as at the CLI
    assert all(float(r["latency_ms"]) > 0 for r in rows)


def test_a_csv_export_to_a_new_name_or_the_exact_name_does_not_ask(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    dialogs.save_path = str(tmp_path / "fresh")
    export_and_wait(qtbot, window)
    assert (tmp_path / "fresh.csv").exists()
    dialogs.save_path = str(tmp_path / "fresh.csv")  # the dialog itself confirmed this name
    export_and_wait(qtbot, window)
    assert "question" not in dialogs.kinds()


def test_a_png_export_asks_before_replacing_the_file_whose_suffix_it_changed(
    window: Any, dialogs: Any, tmp_path: Path
) -> None:
    existing = tmp_path / "notes.png"
    existing.write_bytes(b"not yet a picture")
    dialogs.save_path = str(tmp_path / "notes.txt")  # becomes notes.png
    dialogs.question_answer = NO
    assert window.exports.plots_png() is None
    assert existing.read_bytes() == b"not yet a picture"
    assert len(dialogs.texts("question")) == 1
    dialogs.question_answer = YES
    assert window.exports.plots_png() == existing
    assert existing.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_png_export_onto_the_database_is_refused_and_the_runs_survive(
    window: Any, dialogs: Any, db_path: Path
) -> None:
    png_db = db_path.with_suffix(".png")
    png_db.symlink_to(db_path.name)  # a name that ends in .png but is the database
    dialogs.save_path = str(png_db)
    assert window.exports.plots_png() is None
    assert any("database" in text for text in dialogs.texts("warning"))
    with Store(db_path, read_only=True) as store:
        assert [r.label for r in store.runs()] == [FORMULA]


def test_a_label_longer_than_the_clis_cap_is_refused_by_the_window(
    qtbot: Any, window: Any, dialogs: Any
) -> None:
    [run_id] = window.history.selected_ids()
    dialogs.text_answer = ("x" * 100_000, True)
    qtbot.mouseClick(window.history.relabel_button, Qt.MouseButton.LeftButton)
    assert window.store.run(run_id).label == FORMULA  # unchanged
    assert any(str(MAX_LABEL_CHARS) in text for text in dialogs.texts())
    # The form and the ladder tab cannot take more than the cap in the first place.
    window.controls.label.setText("y" * 100_000)
    assert len(window.controls.label.text()) == MAX_LABEL_CHARS
    window.ladder.label_edit.setText("z" * 100_000)
    assert len(window.ladder.label_edit.text()) == MAX_LABEL_CHARS
