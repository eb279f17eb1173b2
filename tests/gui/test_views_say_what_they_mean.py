"""Issue #52 item 6: the views' axes, marks and styles say what they mean (seen in a window)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyqtgraph as pg
import pytest
from gui_helpers import seed_run
from PySide6.QtCore import Qt

from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.gui.colors import run_style
from workbench.store import Store

pytestmark = pytest.mark.gui


def drawn_ticks(plot: pg.PlotItem, side: str = "bottom") -> list[str]:
    """The tick labels the axis draws over its current range and size, as it computes them."""
    axis = plot.getAxis(side)
    lo, hi = axis.range
    length = axis.width() if side in ("bottom", "top") else axis.height()
    labels: list[str] = []
    for spacing, values in axis.tickValues(lo, hi, length):
        shown = [v for v in values if lo <= v <= hi]
        labels += [t for t in axis.tickStrings(shown, axis.scale, spacing) if t]
    return labels


def line_styles(plot: pg.PlotItem) -> list[tuple[str, str, Qt.PenStyle]]:
    """(colour, marker, dash) of every run line the plot draws (band edges draw no pen)."""
    return [
        (item.opts["pen"].color().name(), item.opts["symbol"], item.opts["pen"].style())
        for item in plot.items
        if isinstance(item, pg.PlotDataItem) and item.opts["symbol"] is not None
    ]


def test_twelve_runs_get_twelve_styles_that_differ_by_colour_or_marker_and_dash(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    with Store(db_path) as store:
        ids = [seed_run(store, label=f"r{i}") for i in range(12)]
    window = make_window()
    window.history.select_runs(ids)
    qtbot.waitUntil(lambda: len(window.plots.run_ids()) == 12)
    styles = line_styles(window.plots.latency_plot)
    assert len(styles) == 12 and len(set(styles)) == 12, styles
    # Two runs of one colour differ in marker and in dash, not in a shade of it.
    by_color: dict[str, list[tuple[str, Qt.PenStyle]]] = {}
    for color, symbol, dash in styles:
        by_color.setdefault(color, []).append((symbol, dash))
    for color, marks in by_color.items():
        assert len({m[0] for m in marks}) == len(marks), (color, marks)
        assert len({m[1] for m in marks}) == len(marks), (color, marks)
    assert {run_style(i).color.name() for i in ids} == set(by_color)


def test_an_empty_running_run_plots_no_negative_throughput_and_no_repeated_n(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    with Store(db_path) as store:
        spec = SweepSpec(Problem(batch=1, heads=2, head_dim=32), (64, 128), KernelConfig())
        running = store.create_run(spec, {"hostname": "here"})  # no point yet
        one = seed_run(store, label="one length", seq_lens=(8192,))
    window = make_window()
    plots = window.plots
    window.history.select_runs([running])
    qtbot.waitUntil(lambda: plots.run_ids() == [running])
    for plot in (plots.latency_plot, plots.tflops_plot):
        ticks = drawn_ticks(plot)
        assert len(ticks) >= 2 and len(ticks) == len(set(ticks)), ticks
    assert plots.tflops_plot.viewRange()[1][0] >= 0.0
    assert plots.tflops_plot.viewRange()[1][1] > 0.5  # not a ±0.015 sliver

    # One length: its own N is labelled, beside its neighbours.
    window.history.select_runs([one])
    qtbot.waitUntil(lambda: plots.run_ids() == [one])
    ticks = drawn_ticks(plots.latency_plot)
    assert ticks == ["8k"], ticks
    low, high = plots.tflops_plot.viewRange()[1]
    assert low >= 0.0 and high > 0.0

    # Nothing selected: back to the empty frame, not the last run's axes.
    window.history.select_runs([])
    qtbot.waitUntil(lambda: plots.run_ids() == [])
    assert plots.latency_plot.viewRange()[0] == pytest.approx([6.0, 14.0])  # N 64 to 16k
    ticks = drawn_ticks(plots.latency_plot)
    assert len(ticks) >= 2 and len(ticks) == len(set(ticks)), ticks
    assert plots.tflops_plot.viewRange()[1] == pytest.approx([0.0, 1.0])


def roofline_of(qtbot: Any, make_window: Any, run: int) -> Any:
    """The Roofline tab of a new window with ``run`` selected, its points placed."""
    window = make_window(probe_backends=False)
    view = window.explain.roofline
    window.tabs.setCurrentWidget(view)
    window.history.select_runs([run])
    qtbot.waitUntil(lambda: view.data is not None and run in view.scatters)
    qtbot.wait(50)  # the layout places the plot
    return view


def test_roofline_hover_describes_the_point_and_the_axes_read_plainly(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    with Store(db_path) as store:
        run = seed_run(store, label="on the CPU", seq_lens=(64, 128, 256))
    view = roofline_of(qtbot, make_window, run)
    # CPU points span less than a decade of TFLOP/s: still several labels, no "(x0.001)".
    left = view.plot.getAxis("left")
    assert "x0.001" not in left.labelString() and left.labelString().count("TFLOP/s") == 1
    assert len(drawn_ticks(view.plot, "left")) >= 2, drawn_ticks(view.plot, "left")
    # The legend sits below the plot, not among its points.
    box = view.plot.getViewBox().sceneBoundingRect()
    assert not view.legend.sceneBoundingRect().intersects(box)
    assert [label.text for _, label in view.legend.items] == [
        next(r["name"] for r in view.data["runs"] if r["run_id"] == run)
    ]
    # Hovering a point says which one it is.
    spot = view.scatters[run].points()[1]
    scene = view.scatters[run].mapToScene(spot.pos())
    qtbot.mouseMove(view.plot_widget.viewport(), view.plot_widget.mapFromScene(scene))
    qtbot.waitUntil(lambda: "N = 128" in view.hover.text())
    assert "on the CPU" in view.hover.text() and "TFLOP/s" in view.hover.text()
    # Away from every point: the hint again.
    corner = view.plot.getViewBox().sceneBoundingRect().topLeft()
    qtbot.mouseMove(view.plot_widget.viewport(), view.plot_widget.mapFromScene(corner))
    qtbot.waitUntil(lambda: "N = 128" not in view.hover.text())


def test_roofline_points_a_few_percent_apart_still_get_several_tflops_labels(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    """A new user's cancelled CPU run: two points 15 % apart in TFLOP/s drew one label ("0.03")
    on the roofline's y axis, or none; the view now spans at least a decade."""
    samples = {512: (2.3, 2.3, 2.3), 1024: (8.0, 8.0, 8.0)}  # 0.029 and 0.034 TFLOP/s
    with Store(db_path) as store:
        run = seed_run(store, label="two points", seq_lens=(512, 1024), samples_ms=samples)
    view = roofline_of(qtbot, make_window, run)
    for side in ("left", "bottom"):
        assert len(drawn_ticks(view.plot, side)) >= 2, (side, drawn_ticks(view.plot, side))
    lo, hi = view.plot.getAxis("left").range  # both points in view
    tflops = [p["tflops"] for p in view.data["runs"][0]["points"]]
    assert all(10**lo < t < 10**hi for t in tflops), (lo, hi, tflops)


def shows_whole(label: Any) -> bool:
    """A label shows all its text: one line as its text, or wrapped to the height its
    text needs at its width."""
    text = label.text()
    if label.wordWrap():
        return label.height() >= label.heightForWidth(label.width())
    return label.width() >= label.fontMetrics().horizontalAdvance(text)


def test_labels_are_whole_and_autotune_is_in_view_at_1424x852(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    from PySide6.QtWidgets import QStyle, QStyleOptionComboBox

    lengths = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
    with Store(db_path) as store:
        group = store.create_group("ladder", "two steps", {"steps": ["baseline", "bigger"]})
        steps = [
            seed_run(store, seq_lens=(64, 128), group_id=group, step=step, label=step)
            for step in ("baseline", "bigger")
        ]
        long_a = seed_run(store, label="a fairly long label for run a", seq_lens=lengths)
        long_b = seed_run(store, label="b", seq_lens=lengths)
    window = make_window(probe_backends=False)
    window.resize(1424, 852)
    qtbot.waitUntil(lambda: window.width() == 1424 and window.height() == 852)

    # The knob panel: Autotune's box lies whole inside the form's visible area.
    c = window.controls
    viewport = c.form_scroll.viewport()
    top_left = c.autotune.mapTo(viewport, c.autotune.rect().topLeft())
    bottom_right = c.autotune.mapTo(viewport, c.autotune.rect().bottomRight())
    assert viewport.rect().contains(top_left) and viewport.rect().contains(bottom_right)
    assert c.autotune.isVisible() and c.autotune.text() == "Autotune"

    # Ladder: the preset box shows its whole name; the block map's title does not run into
    # the "Sequence length" beside it.
    window.tabs.setCurrentWidget(window.ladder)
    panel = window.ladder
    qtbot.waitUntil(lambda: panel.data is not None and panel.table.rowCount() == 2)
    preset = panel.preset
    option = QStyleOptionComboBox()
    preset.initStyleOption(option)
    field = preset.style().subControlRect(
        QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxEditField, preset
    )
    assert preset.currentText() == "this GPU's"
    for text in (preset.itemText(i) for i in range(preset.count())):
        assert field.width() >= preset.fontMetrics().horizontalAdvance(text), text
    panel.select_step(1, 128)
    qtbot.wait(50)
    title, length = panel.heatmap.title, panel.heatmap.length_label
    assert title.text().startswith(f"Step 2: bigger · #{steps[1]}")
    assert shows_whole(title) and shows_whole(length)
    title_box = title.geometry().translated(
        title.parentWidget().mapTo(panel, title.pos()) - title.pos()
    )
    length_box = length.geometry().translated(
        length.parentWidget().mapTo(panel, length.pos()) - length.pos()
    )
    assert not title_box.intersects(length_box)

    # Compare: the chart's y label fits its axis, with eight lengths in the table above.
    window.tabs.setCurrentWidget(window.compare)
    window.history.select_runs([long_a, long_b])
    qtbot.waitUntil(lambda: window.compare.table.rowCount() == len(lengths))
    qtbot.wait(50)
    axis = window.compare.chart.plot.getAxis("left")
    assert axis.label.toPlainText().strip() == "× baseline"
    assert axis.label.boundingRect().width() <= axis.boundingRect().height()


def painted_ticks(plot: pg.PlotItem, side: str = "left") -> list[str]:
    """The tick labels the axis paints, after pyqtgraph drops a level whose labels would
    crowd (what the user reads, unlike the labels it computes)."""
    from PySide6.QtGui import QImage, QPainter

    image = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = plot.getAxis(side).generateDrawSpecs(painter)
    finally:
        painter.end()
    return [text for _, _, text in specs[2]] if specs else []


def test_a_narrow_latency_span_on_a_laptop_screen_reads_two_labels_or_more(
    qtbot: Any, make_window: Any, db_path: Path, rng: Any
) -> None:
    low = float(rng.uniform(1.05, 1.3))  # ms: a run whose latencies stay between two ticks
    high = low * float(rng.uniform(1.15, 1.4))
    print(f"latencies {low:.3f} and {high:.3f} ms")
    with Store(db_path) as store:
        run = seed_run(store, samples_ms={64: (low,) * 3, 128: (high,) * 3})
    window = make_window(probe_backends=False)
    window.resize(1366, 768)
    window.history.select_runs([run])
    plot = window.plots.latency_plot
    axis = plot.getAxis("left")
    qtbot.waitUntil(lambda: 10.0 ** axis.range[1] < 2 * high, timeout=5_000)  # the run's span
    labels = painted_ticks(plot)
    print("painted", labels, [round(10.0**v, 3) for v in axis.range])
    assert len(labels) >= 2, (labels, axis.range)
    assert len(set(labels)) == len(labels), labels  # "1.2" and "1.4", never "1" twice
    values = [float(text.replace(",", "")) for text in labels]
    lo, hi = (10.0**v for v in axis.range)
    assert all(lo <= v <= hi for v in values), (labels, lo, hi)


def test_a_one_point_runs_latency_has_a_label_next_to_its_point(
    qtbot: Any, make_window: Any, db_path: Path, rng: Any
) -> None:
    """A decode run measured at one length (0.33 ms on the H100) sat under an axis labelled
    only 1 and 0.5: nothing near the point said what it was. 3 and 4 are labelled too there."""
    latency = float(rng.uniform(0.31, 0.39))
    print(f"latency {latency:.3f} ms")
    with Store(db_path) as store:
        run = seed_run(store, seq_lens=(32768,), samples_ms={32768: (latency,) * 3})
    window = make_window(probe_backends=False)
    window.resize(1366, 768)
    window.history.select_runs([run])
    plot = window.plots.latency_plot
    axis = plot.getAxis("left")
    qtbot.waitUntil(lambda: 10.0 ** axis.range[1] < 2.0, timeout=5_000)  # the run's own range
    labels = painted_ticks(plot)
    print("painted", labels, [round(10.0**v, 3) for v in axis.range])
    values = [float(text.replace(",", "")) for text in labels]
    assert any(latency / 1.25 <= v <= latency * 1.25 for v in values), (labels, latency)
