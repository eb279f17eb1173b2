"""Settings are remembered between launches, in the test's own temporary location."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import pick, small_problem, type_into
from PySide6.QtCore import QSettings

pytestmark = pytest.mark.gui


def test_settings_survive_a_restart(
    qtbot: Any, make_window: Any, settings: QSettings, db_path: Path, tmp_path: Path
) -> None:
    window = make_window()
    small_problem(qtbot, window, seq_lens="128,512", mask="window", tile=32, label="remember me")
    type_into(qtbot, window.controls.window, "77")
    type_into(qtbot, window.controls.batch, "3")
    pick(window.controls.occupancy, 2)
    pick(window.controls.num_worker_warps, 8)
    pick(window.controls.num_ctas, 2)
    window.controls.remap.setChecked(True)
    # Within the offscreen screen (800 × 800): restoreGeometry keeps a window on its screen.
    window.resize(790, 700)
    window.tabs.setCurrentWidget(window.compare)
    expected = window.controls.spec()
    window.close()  # what the user does; closeEvent saves
    settings.sync()
    assert Path(settings.fileName()).parent == tmp_path  # never the user's real settings

    again = make_window(None)  # no path given: the remembered database
    assert again.store.path == db_path
    assert again.controls.spec() == expected
    assert (again.size().width(), again.size().height()) == (790, 700)
    assert again.tabs.currentWidget() is again.compare
    assert again.controls.window.isEnabled()  # the mask's dependent field follows the state


def test_unreadable_settings_fall_back_to_defaults(
    qtbot: Any, make_window: Any, settings: QSettings
) -> None:
    settings.setValue("controls", "{not json")
    settings.setValue("window/tab", "sideways")
    settings.setValue("window/geometry", "garbage")
    settings.sync()
    window = make_window()
    assert window.controls.spec().problem.batch == 1  # the form's defaults
    assert window.tabs.currentIndex() == 0

    settings.setValue("controls", json.dumps({"batch": "many", "heads": 4, "mask": "nonsense"}))
    settings.sync()
    other = make_window()
    assert other.controls.heads.value() == 4 and other.controls.batch.value() == 1
    assert other.controls.mask.currentData() == "none"


def test_default_settings_are_redirected_per_test(isolated_settings: Path) -> None:
    here = QSettings()  # what MainWindow uses when no settings are passed
    assert Path(here.fileName()).is_relative_to(isolated_settings)
