"""Issue 39's window: it fits a laptop's screen, the data is what you see first, and nothing
moves or lingers. Each test opens the real window on a screen of the size a user has."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import click_run, seed_run, small_problem, type_into
from PySide6.QtCore import QPoint, QRect, Qt, QTimer
from PySide6.QtGui import QScreen
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget
from readouts import legend_names

from workbench.store import Store

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]
LADDER_DB = ROOT / "bench" / "results" / "experiments" / "h200-workbench-ladder.db"
LAPTOPS = [(1280, 720), (1366, 768)]


@pytest.fixture
def screen_of(monkeypatch: pytest.MonkeyPatch) -> Callable[[int, int], QRect]:
    """Make the screen the window opens on report ``width`` × ``height`` of room (what a
    laptop's desktop leaves once its panel is drawn)."""

    def use(width: int, height: int) -> QRect:
        room = QRect(0, 0, width, height)
        monkeypatch.setattr(QScreen, "availableGeometry", lambda self: QRect(room))
        return room

    return use


def global_rect(widget: QWidget) -> QRect:
    return QRect(widget.mapToGlobal(QPoint(0, 0)), widget.size())


def reachable(widget: QWidget, room: QRect) -> bool:
    """Shown, wholly on the screen, and not cut off by a parent (a scroll area, a splitter)."""
    return (
        widget.isVisible()
        and room.contains(global_rect(widget))
        and widget.visibleRegion().boundingRect() == widget.rect()
    )


@pytest.mark.parametrize(("width", "height"), LAPTOPS)
def test_every_control_is_reachable_on_a_laptop_screen(
    qtbot: Any, make_window: Any, db_path: Path, screen_of: Any, width: int, height: int
) -> None:
    with Store(db_path) as store:
        for i in range(8):
            seed_run(store, label=f"run {i}", seq_lens=(64,))
    room = screen_of(width, height)
    window = make_window()
    qtbot.wait(50)
    assert room.contains(window.frameGeometry()), (window.frameGeometry(), room)
    c = window.controls
    for widget in (c.run_button, c.cancel_button, c.label, c.backends, window.statusBar()):
        assert reachable(widget, room), (widget.objectName() or widget, width, height)
    # Every History column, Status at the right included, without scrolling sideways.
    table = window.history.table
    header = table.horizontalHeader()
    for col in range(header.count()):
        left = header.sectionViewportPosition(col)
        assert left >= 0 and left + header.sectionSize(col) <= table.viewport().width(), col
    assert reachable(table.viewport(), room)


def test_a_saved_window_larger_than_the_screen_is_brought_onto_it(
    qtbot: Any, make_window: Any, screen_of: Any, settings: Any
) -> None:
    big = make_window()
    big.resize(1800, 1100)  # saved on a desktop monitor
    big.shutdown()
    room = screen_of(1366, 768)
    window = make_window()
    assert room.contains(window.frameGeometry()), window.frameGeometry()


def test_the_status_bar_shows_the_backend_line_whole(qtbot: Any, window: Any) -> None:
    label = window.machine_label
    summary = label.toolTip().splitlines()[0]
    assert "(" in summary  # the probe said why no GPU backend: that is what got cut
    assert label.text() and not label.text().endswith("…") and summary.startswith(label.text())
    assert label.fontMetrics().horizontalAdvance(label.text()) <= label.contentsRect().width()


def test_a_validation_message_does_not_move_run_cancel_or_label(qtbot: Any, window: Any) -> None:
    c = window.controls
    widgets = (c.run_button, c.cancel_button, c.label)
    before = [w.mapTo(window, QPoint(0, 0)) for w in widgets]
    type_into(qtbot, c.seq_lens, "100,abc")
    qtbot.mouseClick(c.run_button, Qt.MouseButton.LeftButton)
    assert not window.jobs.is_running() and c.error_label.isVisible() and c.error_label.text()
    qtbot.wait(20)
    assert [w.mapTo(window, QPoint(0, 0)) for w in widgets] == before
    # The whole message is readable: in the space kept for it, or in its tooltip.
    assert c.error_label.toolTip() == c.error_label.text()
    type_into(qtbot, c.seq_lens, "64,128")  # the user fixes it: the message goes
    assert not c.error_label.isVisible()
    qtbot.wait(20)
    assert [w.mapTo(window, QPoint(0, 0)) for w in widgets] == before


def test_the_quit_question_goes_away_when_the_sweep_finishes_meanwhile(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[QMessageBox] = []
    lingered: list[bool] = []

    def give_up(box: QMessageBox) -> None:
        if box.isVisible():
            lingered.append(True)  # still up long after the sweep ended: the bug
            box.reject()

    def real_question(parent: Any, title: str, text: str, buttons: Any, default: Any) -> Any:
        """The modal question as Qt shows it, with a guard so a failing test cannot hang."""
        box = QMessageBox(QMessageBox.Icon.Question, title, text, buttons, parent)
        box.setDefaultButton(default)
        asked.append(box)
        guard = QTimer(box)  # goes with the box: it must not fire into a later test
        guard.setSingleShot(True)
        guard.timeout.connect(lambda: give_up(box))
        guard.start(20_000)
        box.exec()
        guard.stop()
        clicked = box.clickedButton()
        return box.standardButton(clicked) if clicked else QMessageBox.StandardButton.No

    monkeypatch.setattr(QMessageBox, "question", staticmethod(real_question))
    small_problem(qtbot, window, seq_lens="64,128,256")
    click_run(qtbot, window)
    assert window.jobs.is_running()
    window.close()  # the user closes; the sweep ends on its own while the question is up
    assert asked and "A sweep is running" in asked[0].windowTitle()
    assert not window.jobs.is_running()
    assert not asked[0].isVisible() and not lingered  # answered for the user: moot now
    assert window.isVisible()  # and the window stays, showing how the sweep ended
    assert window.store.run(window.jobs.last_run_id).status == "complete"


@pytest.fixture
def ladder_db(db_path: Path) -> Path:
    shutil.copy(LADDER_DB, db_path)  # the H200 ladder: 7 steps × 5 lengths
    return db_path


@pytest.mark.parametrize(("width", "height"), LAPTOPS)
def test_the_ladder_tab_shows_every_step_every_length_and_a_readable_map(
    qtbot: Any, make_window: Any, ladder_db: Path, screen_of: Any, width: int, height: int
) -> None:
    screen_of(width, height)
    window = make_window(probe_backends=False)
    window.tabs.setCurrentWidget(window.ladder)
    panel = window.ladder
    qtbot.waitUntil(lambda: panel.data is not None and len(panel.data.rows) == 7)
    qtbot.wait(50)
    table = panel.table
    viewport = table.viewport().rect()
    for row in range(table.rowCount()):
        for col in range(table.columnCount()):
            rect = table.visualItemRect(table.item(row, col))
            assert viewport.contains(rect), (row, col, rect, viewport)
    panel.select_step(1, 16384)
    qtbot.waitUntil(lambda: panel.heatmap.current_grid() is not None)
    qtbot.wait(50)
    box = panel.heatmap.plot.getViewBox().sceneBoundingRect()
    assert box.height() >= 80, box  # was 20 px at the old default size
    # Whole-block ticks with room for each label (they ran into each other at 20 px).
    axis = panel.heatmap.plot.getAxis("left")
    rows = panel.heatmap.current_grid().shape[0]
    ticks = [v for _, vs in axis.tickValues(-0.5, rows - 0.5, box.height()) for v in vs]
    assert ticks and box.height() / len(ticks) >= 20, (box.height(), ticks)


def test_the_empty_ladder_chart_counts_whole_steps_and_hints_once(window: Any) -> None:
    panel = window.ladder
    window.tabs.setCurrentWidget(panel)
    assert panel.data is None
    axis = panel.plot.getAxis("bottom")
    lo, hi = axis.range
    labels = [text for level in axis._tickLevels or [] for _, text in level]  # setTicks' own
    assert labels == [str(v) for v in range(1, 8)], labels
    assert 0 < lo < 1 and 7 < hi < 8
    hint = "Click a step"
    texts = [w.text() for w in panel.findChildren(type(panel.info)) if w.isVisible()]
    assert sum(hint in t for t in texts) == 1, texts


def legend_clear_of_curves(legend: Any, plot: Any) -> bool:
    return not legend.sceneBoundingRect().intersects(plot.getViewBox().sceneBoundingRect())


def test_legends_sit_outside_the_curves_in_plots_compare_and_ladder(
    qtbot: Any, make_window: Any, ladder_db: Path, screen_of: Any
) -> None:
    screen_of(1366, 768)
    window = make_window(probe_backends=False)
    ids = [r.id for r in window.store.group_runs(1)][:4]
    window.history.model.fetch_all()
    window.history.select_runs(ids)
    plots = window.plots
    qtbot.waitUntil(lambda: len(legend_names(plots.legend)) == 4)
    qtbot.wait(50)
    for plot in (plots.latency_plot, plots.tflops_plot):
        assert legend_clear_of_curves(plots.legend, plot)
    window.tabs.setCurrentWidget(window.compare)
    qtbot.waitUntil(lambda: len(legend_names(window.compare.chart.legend)) == 3)
    qtbot.wait(50)
    assert legend_clear_of_curves(window.compare.chart.legend, window.compare.chart.plot)
    window.tabs.setCurrentWidget(window.ladder)
    qtbot.waitUntil(lambda: len(legend_names(window.ladder.legend)) == 5)
    qtbot.wait(50)
    assert legend_clear_of_curves(window.ladder.legend, window.ladder.plot)
    # Compare's table shows every length of the runs above its chart.
    table = window.compare.table
    assert table.rowCount() == 5
    last = table.visualRect(table.model().index(4, 0))
    assert table.viewport().rect().contains(last), (last, table.viewport().rect())


def test_each_tab_keeps_its_share_and_the_splitters_are_remembered(
    qtbot: Any, make_window: Any, screen_of: Any, settings: Any
) -> None:
    screen_of(1366, 768)
    window = make_window(probe_backends=False)
    window.tabs.setCurrentWidget(window.plots)
    split = window.right_split
    total = sum(split.sizes())
    split.setSizes([total // 2, total - total // 2])  # the user drags History up
    window.tabs.setCurrentWidget(window.ladder)
    assert window.tab_shares.share(3) > 0.7  # the Ladder tab gets most of the height
    window.tabs.setCurrentWidget(window.plots)
    assert abs(window.tab_shares.share(0) - 0.5) < 0.02  # Plots keeps what the user dragged
    compare_sizes = [300, 120]
    window.compare.split.setSizes(compare_sizes)
    wanted = window.compare.split.sizes()
    window.close()

    again = make_window(probe_backends=False)
    assert again.compare.split.sizes() == wanted
    assert abs(again.tab_shares.share(0) - 0.5) < 0.02
    assert again.tab_shares.share(3) > 0.7


def test_the_default_window_fills_a_large_screen_only_to_its_preferred_size(
    make_window: Any, screen_of: Any
) -> None:
    screen_of(2560, 1440)
    window = make_window(probe_backends=False)
    assert (window.width(), window.height()) == (1440, 900)
    assert QApplication.instance() is not None


def test_two_profiled_runs_keep_compares_chart_on_a_laptop_screen(
    qtbot: Any, make_window: Any, tmp_path: Path, screen_of: Any
) -> None:
    """Ours and FA4 profiled at N 8k (the committed prefill database): the Nsight Compute
    metrics sit beside the chart, not under it (under it they squeezed a 1366x768 chart to a
    strip), baseline first, one line a metric."""
    copy = tmp_path / "h200-prefill.db"
    shutil.copy(ROOT / "bench" / "results" / "h200-prefill.db", copy)  # opening may migrate
    screen_of(1366, 768)
    window = make_window(copy, probe_backends=False)
    window.history.model.fetch_all()
    window.history.select_runs([4, 6])  # fp16 D 128 B4 H32, no mask: cuTile and FA4
    window.tabs.setCurrentWidget(window.compare)
    panel = window.compare
    qtbot.waitUntil(lambda: panel.table.rowCount() == 5)  # both runs' points are in
    panel.pin_baseline(6)
    qtbot.waitUntil(lambda: panel.ncu_box.isVisible())
    qtbot.wait(50)
    table = panel.ncu_table
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert headers == ["metric", "#6 fa4", "#4 cutile"]
    chart, box = global_rect(panel.chart), global_rect(panel.ncu_box)
    assert box.left() >= chart.right() and chart.height() >= 150, (chart, box)
    rows = {table.item(r, 0).text(): r for r in range(table.rowCount())}
    shown = table.viewport().rect()
    in_view = [
        table.item(r, 0).text()
        for r in range(table.rowCount())
        if shown.contains(table.visualRect(table.model().index(r, 1)))
    ]
    # One line a metric: the headlines from the duration to the tensor pipe and beyond.
    assert in_view[:3] == ["duration", "SM throughput", "tensor pipe active"]
    assert len(in_view) >= 6, in_view
    # ncu's "byte/block" read as bytes: 164,976 of them are 161 KB, not "164976 KB".
    shared = table.item(rows["shared memory per block"], 2).text()
    assert shared.startswith("161.1") and shared.endswith("KB"), shared
