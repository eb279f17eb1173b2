"""Compare opens a group as one unit, and draws each run's speed-up against the baseline."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gui_helpers import row_rect_center, seed_run
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMenu
from readouts import cell_text, run_band, run_band_edges, run_curve

from workbench.cli import main as cli_main
from workbench.store import Store

pytestmark = pytest.mark.gui


def ms_column(panel: Any, run_id: int) -> int:
    """The table column of a run's latency; its Δ % and speed-up × follow it."""
    for col in range(panel.table.columnCount()):
        if panel.table.horizontalHeaderItem(col).text().startswith(f"#{run_id} "):
            return col
    raise AssertionError(f"run {run_id} has no column")


@pytest.fixture
def group(db_path: Path) -> tuple[int, list[int], int]:
    """A stored group of three backends' runs, and one run outside it (made last)."""
    with Store(db_path) as store:
        gid = store.create_group("backends", "trio", {"backends": ["a", "b", "c"], "seed": 7})
        base = seed_run(
            store,
            label="a",
            seq_lens=(64, 128, 256),
            samples_ms={64: (1.0, 1.0, 1.0), 128: (2.0, 2.0, 2.0), 256: (8.0, 8.0, 8.0)},
            group_id=gid,
            step="a",
        )
        faster = seed_run(
            store,
            label="b",
            seq_lens=(64, 128, 256),
            samples_ms={64: (0.5, 0.5, 0.5), 128: (1.0, 1.0, 1.0), 256: (4.0, 4.0, 4.0)},
            group_id=gid,
            step="b",
        )
        level = seed_run(
            store,
            label="c",
            seq_lens=(64, 128, 256),
            samples_ms={64: (0.9, 1.0, 1.1), 128: (2.0, 2.01, 2.02), 256: (8.0, 8.0, 8.0)},
            group_id=gid,
            step="c",
        )
        outside = seed_run(store, label="outside", seq_lens=(64,))
    return gid, [base, faster, level], outside


def test_compare_group_from_the_history_menu_fills_compare_with_the_group(
    qtbot: Any, make_window: Any, group: tuple[int, list[int], int], monkeypatch: Any
) -> None:
    _gid, (base, faster, level), outside = group
    window = make_window()
    history = window.history
    # One run of the group selected (the newest row is the outside run: row 0).
    row = history.model.row_of(faster)
    qtbot.mouseClick(
        history.table.viewport(), Qt.MouseButton.LeftButton, pos=row_rect_center(history.table, row)
    )
    assert history.selected_ids() == [faster] and history.group_button.isEnabled()

    def choose(menu: QMenu, global_pos: Any) -> Any:
        action = next(a for a in menu.actions() if a.text() == "Compare group")
        assert action.isEnabled()
        action.trigger()
        return action

    monkeypatch.setattr(history, "exec_menu", choose)
    history.table.customContextMenuRequested.emit(row_rect_center(history.table, row))
    panel = window.compare
    assert window.tabs.currentWidget() is panel
    assert sorted(history.selected_ids()) == [base, faster, level]
    assert outside not in history.selected_ids()
    # The whole group, the first backend's run as baseline, selectable among its runs.
    assert panel.baseline_id == base
    assert {panel.baseline.itemData(i) for i in range(panel.baseline.count())} == {
        base,
        faster,
        level,
    }
    assert panel.table.rowCount() == 3 and panel.table.columnCount() == 2 + 3 * 2

    # The chart: one curve per non-baseline run, y = baseline latency / run latency.
    chart = panel.chart
    assert sorted(chart.run_ids()) == [faster, level]
    x, y = run_curve(chart.plot, faster)
    np.testing.assert_allclose(x, [6.0, 7.0, 8.0])
    np.testing.assert_allclose(y, [2.0, 2.0, 2.0])
    _, y_level = run_curve(chart.plot, level)
    np.testing.assert_allclose(y_level, [1.0, 2.0 / 2.01, 1.0])
    # Bands hold 1 exactly where the table marks "~" (within the noise), and are drawn.
    for run_id in (faster, level):
        low, high = run_band_edges(chart.plot, run_id)
        col = ms_column(panel, run_id) + 2
        for r in range(3):
            within = cell_text(panel.table, r, col).endswith("~")
            assert (low[r] <= 1.0 <= high[r]) == within
        assert np.all(low <= run_curve(chart.plot, run_id)[1]) and np.all(
            run_curve(chart.plot, run_id)[1] <= high
        )
        assert not run_band(chart.plot, run_id).path().isEmpty()
    speedups = ms_column(panel, faster) + 2
    assert [cell_text(panel.table, r, speedups) for r in range(3)] == ["2.000×"] * 3

    # Picking another baseline redraws the chart against it.
    index = panel.baseline.findData(faster)
    panel.baseline.setCurrentIndex(index)
    panel.baseline.activated.emit(index)
    assert sorted(chart.run_ids()) == [base, level]
    np.testing.assert_allclose(run_curve(chart.plot, base)[1], [0.5, 0.5, 0.5])


def test_compare_group_button_needs_runs_of_one_group(
    qtbot: Any, make_window: Any, group: tuple[int, list[int], int]
) -> None:
    gid, (base, faster, _), outside = group
    window = make_window()
    history = window.history
    history.select_runs([outside])
    assert not history.group_button.isEnabled()
    history.select_runs([outside, base])  # mixed: not one group
    assert not history.group_button.isEnabled()
    history.select_runs([base, faster])
    assert history.selected_group() == gid
    qtbot.mouseClick(history.group_button, Qt.MouseButton.LeftButton)
    assert len(history.selected_ids()) == 3 and window.compare.chart.run_ids()


def test_window_and_cli_print_the_same_speed_up_and_delta(
    qtbot: Any,
    make_window: Any,
    group: tuple[int, list[int], int],
    capsys: Any,
    db_path: Path,
) -> None:
    """One convention: speed-up × = base latency / run latency, "~" within the noise."""
    gid, (base, faster, level), _ = group
    assert cli_main(["compare", "--group", str(gid), "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    window = make_window()
    window.open_group_compare(gid)
    panel = window.compare
    assert panel.baseline_id == base
    lines = {line.split()[0]: line for line in out.splitlines() if line[:1].isdigit()}
    for r, n in enumerate((64, 128, 256)):
        cli_line = lines[str(n)]
        for run_id in (faster, level):
            delta = cell_text(panel.table, r, ms_column(panel, run_id) + 1)
            shown = cell_text(panel.table, r, ms_column(panel, run_id) + 2)
            # The CLI's table prints the window's Δ % and speed-up ×, side by side.
            side_by_side = re.escape(delta) + r"\s+" + re.escape(shown)
            assert re.search(side_by_side, cli_line), (delta, shown, cli_line)
    import json

    assert cli_main(["compare", "--group", str(gid), "--db", str(window.store.path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for r, entry in enumerate(data["points"]):
        for run_id in (faster, level):
            cell = entry["runs"][str(run_id)]
            col = ms_column(panel, run_id)
            assert cell_text(panel.table, r, col + 1) == f"{cell['delta_pct']:+.1f} %"
            assert math.isclose(
                float(cell_text(panel.table, r, col + 2).split("×")[0]),
                round(cell["speedup_vs_base"], 3),
            )
