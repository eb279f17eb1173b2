"""The rough edges of issue 25, each as the user met it: the block map's axes, the throughput
legend, what fits at 1024×700 and 1440×900, the status bar, and a stale readout."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import seed_run
from PySide6.QtCore import QPoint, QRect
from readouts import legend_names

from workbench.store import Store

pytestmark = pytest.mark.gui


def visible_in_window(widget: Any, window: Any) -> bool:
    """Is the whole widget inside the window's visible area (not scrolled or cut off)?"""
    top_left = widget.mapTo(window, QPoint(0, 0))
    rect = QRect(top_left, widget.size())
    return (
        widget.isVisible() and window.rect().contains(rect) and not widget.visibleRegion().isEmpty()
    )


def test_the_empty_block_map_says_so_instead_of_drawing_empty_axes(make_window: Any) -> None:
    window = make_window()
    window.tabs.setCurrentWidget(window.heatmap)
    panel = window.heatmap
    assert panel.view_stack.currentWidget() is panel.empty_label
    assert "Select a run" in panel.empty_label.text() and not panel.canvas.isVisible()


def test_a_small_block_map_has_whole_block_ticks(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    with Store(db_path) as store:
        run_id = seed_run(store, seq_lens=(64,), mask="causal")  # 2 × 2 blocks of 32
    window = make_window()
    window.tabs.setCurrentWidget(window.heatmap)
    window.history.select_runs([run_id])
    panel = window.heatmap
    qtbot.waitUntil(lambda: panel.current_grid() is not None)
    assert panel.view_stack.currentWidget() is panel.canvas
    for name in ("bottom", "left"):
        axis = panel.plot.getAxis(name)
        lo, hi = axis.range
        ticks = [v for _, values in axis.tickValues(lo, hi, axis.width() or 200) for v in values]
        assert ticks and all(v == int(v) for v in ticks), (name, ticks)
        assert axis.autoSIPrefixScale == 1.0  # no "(x0.001)"


def test_the_throughput_legend_does_not_cover_the_plot(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    with Store(db_path) as store:
        ids = [seed_run(store, label=f"run {i}", seq_lens=(64, 128, 256)) for i in range(3)]
    window = make_window()
    window.history.select_runs(ids)
    plots = window.plots
    qtbot.waitUntil(lambda: len(legend_names(plots.tflops_plot.legend)) == 3)
    legend = plots.tflops_plot.legend.sceneBoundingRect()
    view = plots.tflops_plot.getViewBox().sceneBoundingRect()
    assert not legend.intersects(view), (legend, view)


@pytest.mark.parametrize(("width", "height"), [(1024, 700), (1440, 900)])
def test_run_and_cancel_are_in_view_and_history_shows_enough_rows(
    qtbot: Any, make_window: Any, db_path: Path, width: int, height: int
) -> None:
    with Store(db_path) as store:
        for i in range(10):
            seed_run(store, label=f"run {i}", seq_lens=(64,))
    window = make_window()
    window.resize(width, height)
    qtbot.wait(50)
    for button in (window.controls.run_button, window.controls.cancel_button):
        assert visible_in_window(button, window), (button.objectName(), width, height)
    table = window.history.table
    rows = table.viewport().height() / table.verticalHeader().defaultSectionSize()
    assert rows >= (6 if height >= 900 else 3), rows


def test_a_long_status_message_stays_clear_of_the_backend_line(qtbot: Any, window: Any) -> None:
    label = window.machine_label
    assert label.width() <= 380
    full = label.toolTip().splitlines()[0]
    # The line is whole (its parenthesised why is in the tooltip), never cut mid-word.
    assert not label.text().endswith("…") and full.startswith(label.text())
    assert label.fontMetrics().horizontalAdvance(label.text()) <= label.contentsRect().width()
    window.statusBar().showMessage("The database /a/very/long/path/runs.db was damaged " * 4)
    qtbot.wait(20)
    assert label.isVisible() and "border-left" in label.styleSheet()


def test_the_readout_forgets_a_length_the_new_selection_has_not(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    with Store(db_path) as store:
        long_run = seed_run(store, label="to 512", seq_lens=(128, 512))
        short_run = seed_run(store, label="to 256", seq_lens=(128, 256))
    window = make_window()
    plots = window.plots
    window.history.select_runs([long_run])
    qtbot.waitUntil(lambda: plots.run_ids() == [long_run])
    plots.show_readout_at(math.log2(512))
    assert "N = 512" in plots.readout.text().replace("&nbsp;", " ")
    window.history.select_runs([short_run])
    qtbot.waitUntil(lambda: plots.run_ids() == [short_run])
    assert "512" not in plots.readout.text()
    assert plots.cursor_seq_len is None and not any(
        line.isVisible() for line in plots._cursor_lines
    )
