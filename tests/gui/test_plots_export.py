"""Plot details: the log2 axis, log latency, PNG export of the plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gui_helpers import seed_run
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from workbench.gui.colors import run_color
from workbench.gui.plot_axes import Log2Axis, format_seq_len
from workbench.store import Store

pytestmark = pytest.mark.gui


def test_sequence_lengths_read_as_powers_of_two() -> None:
    assert [format_seq_len(n) for n in (64, 96, 1024, 16384, 65536, 1 << 20)] == [
        "64",
        "96",
        "1k",
        "16k",
        "64k",
        "1M",
    ]
    axis = Log2Axis(orientation="bottom")
    ticks = axis.tickValues(6.0, 14.0, 800)
    assert ticks == [(1.0, [6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0])]
    assert axis.tickStrings([6.0, 10.0, 14.0], 1.0, 1.0) == ["64", "1k", "16k"]
    # A narrow plot thins the labels instead of overlapping them.
    step, values = axis.tickValues(6.0, 20.0, 200)[0]
    assert step > 1 and len(values) <= 5


@pytest.fixture
def plotted(qtbot: Any, make_window: Any, db_path: Path) -> tuple[Any, int]:
    with Store(db_path) as store:
        run_id = seed_run(store, label="to export", seq_lens=(64, 128, 256, 512))
    window = make_window()
    window.history.select_runs([run_id])
    qtbot.waitUntil(lambda: window.plots.run_ids() == [run_id])
    return window, run_id


def test_export_plots_as_png(plotted: tuple[Any, int], dialogs: Any, tmp_path: Path) -> None:
    window, run_id = plotted
    dialogs.save_path = str(tmp_path / "curves")  # no suffix: .png is added
    window.export_png_action.trigger()
    target = tmp_path / "curves.png"
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = QImage(str(target))
    assert image.width() == 1600 and image.height() > 200
    # The run's colour is in the picture: its curves were drawn.
    want = run_color(run_id)
    found = any(
        image.pixelColor(x, y).rgb() == want.rgb()
        for x in range(0, image.width(), 2)
        for y in range(0, image.height(), 2)
    )
    assert found, "the exported PNG has no pixel in the run's colour"
    assert str(target) in window.statusBar().currentMessage()
    dialogs.save_path = ""
    assert window.exports.plots_png() is None  # Cancel writes nothing


def test_log_latency_axis_toggle(qtbot: Any, plotted: tuple[Any, int]) -> None:
    window, run_id = plotted
    line = window.plots._curves[run_id][0].line
    assert line.opts["logMode"] == [False, True]
    qtbot.mouseClick(window.plots.log_latency, Qt.MouseButton.LeftButton)
    assert not window.plots.log_latency.isChecked()
    assert line.opts["logMode"] == [False, False]
    # The throughput plot keeps linear axes either way.
    assert window.plots._curves[run_id][1].line.opts["logMode"] == [False, False]


def test_idle_readout_and_empty_selection(qtbot: Any, plotted: tuple[Any, int]) -> None:
    window, _ = plotted
    assert "Move the cursor" in window.plots.readout.text()
    window.plots.show_readout_at(20.0)  # far from any measured length
    assert window.plots.cursor_seq_len is None
    window.history.table.clearSelection()
    qtbot.waitUntil(lambda: window.plots.run_ids() == [])
    assert "Select runs" in window.plots.readout.text()
    assert window.heatmap.title.text() == "No run selected"
