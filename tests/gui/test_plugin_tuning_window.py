"""The window's Autotune box on a plugin (issue 55 item 2): ticked with the NumPy example in
the picker, each point runs the chunk its tuner found fastest, and History says the run was
tuned and what each length ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gui_helpers import run_and_wait, small_problem, tick_backends
from PySide6.QtCore import Qt
from test_plugin_window import copy_of_example, no_plugins_left  # noqa: F401  (its fixture)

pytestmark = pytest.mark.gui

CHUNKS = (32, 64, 128, 256)  # the example's chunk_rows values, declared tunable


def test_autotune_on_a_plugin_runs_its_tuners_choice_and_history_says_which(
    qtbot: Any, plugin_window: Any, tmp_path: Path
) -> None:
    window = plugin_window(copy_of_example(tmp_path))
    tick_backends(qtbot, window.controls, ["numpy-softcap"])
    small_problem(qtbot, window, seq_lens="64,128")
    window.controls.autotune.click()
    assert window.controls.autotune.isChecked()
    run = window.store.run(run_and_wait(qtbot, window))
    assert (run.backend, run.status) == ("numpy-softcap", "complete"), run.error

    points = window.store.points(run.id)
    chosen = [p.extra["plugin_tuning"]["chosen"]["chunk_rows"] for p in points]
    assert all(c in CHUNKS for c in chosen)
    assert [p.extra["plugin_knobs"]["chunk_rows"] for p in points] == chosen
    model = window.history.model
    row = model.row_of(run.id)
    assert "chunk_rows tuned" in str(model.index(row, 5).data())
    tip = str(model.index(row, 5).data(Qt.ItemDataRole.ToolTipRole))
    assert "Tuned per sequence length:" in tip, tip
    for point, chunk in zip(points, chosen, strict=True):
        assert f"N={point.seq_len}: chunk_rows {chunk}" in tip, tip
