"""A sweep driven through the window: plots, heatmap, history, progress, cancel and failures."""

from __future__ import annotations

import math
import os
import re
import signal
import time
from typing import Any

import numpy as np
import pytest
from gui_helpers import (
    StallMeter,
    assert_within,
    click_run,
    pick,
    run_and_wait,
    small_problem,
    type_into,
)
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QMessageBox
from readouts import drawn_rgb, legend_names, run_band_edges, run_curve

from kernels.schedule import BlockKind, Schedule
from workbench.backends.base import BackendError
from workbench.backends.reference import ReferenceBackend
from workbench.config import ConfigError
from workbench.gui.colors import run_color
from workbench.gui.heatmap import KIND_COLORS
from workbench.store import Store, StoreError

pytestmark = pytest.mark.gui


def test_reference_sweep_fills_plots_history_and_heatmap(qtbot: Any, window: Any) -> None:
    small_problem(qtbot, window, seq_lens="64,128", mask="causal", tile=32, label="first sweep")
    run_id = run_and_wait(qtbot, window)
    store: Store = window.store
    run = store.run(run_id)
    points = store.points(run_id)
    assert run.status == "complete" and run.label == "first sweep"
    assert run.problem.heads == 2 and run.problem.head_dim == 32 and run.config.mask == "causal"
    assert [p.seq_len for p in points] == [64, 128]

    # The plots show exactly what the store holds, on a log2 x axis.
    assert window.plots.run_ids() == [run_id]
    x, y = run_curve(window.plots.latency_plot, run_id)
    np.testing.assert_allclose(x, [6.0, 7.0])
    np.testing.assert_allclose(y, [p.latency_ms for p in points])
    _, tflops = run_curve(window.plots.tflops_plot, run_id)
    np.testing.assert_allclose(tflops, [p.tflops for p in points])
    low, high = run_band_edges(window.plots.latency_plot, run_id)
    np.testing.assert_allclose(low, [p.latency_p20_ms for p in points])
    np.testing.assert_allclose(high, [p.latency_p80_ms for p in points])
    t_low, t_high = run_band_edges(window.plots.tflops_plot, run_id)
    assert np.all(t_low <= tflops + 1e-12) and np.all(t_high >= tflops - 1e-12)
    assert legend_names(window.plots.legend) == [f"#{run_id} reference first sweep"]
    line = window.plots._curves[run_id][0].line
    assert line.opts["pen"].color() == run_color(run_id)

    # The new run is the selected first row of the history, marked complete.
    model = window.history.model
    assert model.rowCount() == 1 and window.history.selected_ids() == [run_id]
    assert model.index(0, 1).data() == "first sweep"
    assert model.index(0, 7).data() == "complete"
    assert model.index(0, 3).data() == "reference"

    # The heatmap shows the largest length, with the schedule's counts.
    heat = window.heatmap
    assert heat.current_seq_len() == 128
    expected = Schedule(128, 128, 32, 32, "causal").counts()
    assert heat.facts is not None and heat.facts.counts == expected
    for name, count in expected.items():
        assert heat.count_labels[name].text() == f"{name}: {count:,}"
    assert f"Skipped {expected['skipped']:,} of 16 blocks" in heat.summary.text()
    saved = expected["skipped"] * 4 * 32 * 32 * 32 * 2
    assert heat.facts.flops_saved == saved
    np.testing.assert_array_equal(
        heat.current_grid(), Schedule(128, 128, 32, 32, "causal").block_map
    )

    # Picking the other length redraws from the store, and the choice sticks.
    pick(heat.seq_len, 64)
    assert heat.facts.counts == Schedule(64, 64, 32, 32, "causal").counts()
    window.history.select_runs([run_id])
    qtbot.wait(50)
    assert heat.current_seq_len() == 64


def test_heatmap_is_row_major_inverted_and_has_tooltips(qtbot: Any, window: Any) -> None:
    small_problem(qtbot, window, seq_lens="128", mask="causal", tile=32)
    run_and_wait(qtbot, window)
    window.tabs.setCurrentWidget(window.heatmap)
    heat = window.heatmap
    qtbot.waitUntil(lambda: heat.image.qimage is not None or heat.image.width() is not None)
    heat.image.render()  # make sure the lookup table has been applied
    grid = heat.current_grid()
    assert grid is not None and grid.shape == (4, 4)
    # Row 0 (first queries) sees only k-block 0: it is masked there and skipped to the right.
    assert grid[0, 3] == BlockKind.SKIPPED and grid[3, 0] == BlockKind.COMPUTED
    assert drawn_rgb(heat.image, 0, 3) == KIND_COLORS[BlockKind.SKIPPED]
    assert drawn_rgb(heat.image, 3, 0) == KIND_COLORS[BlockKind.COMPUTED]
    assert drawn_rgb(heat.image, 0, 0) == KIND_COLORS[BlockKind.MASKED]

    # q-block 0 is drawn at the top (y inverted), k-block 0 at the left.
    box = heat.plot.getViewBox()
    top_left = box.mapViewToScene(QPointF(0, 0))
    bottom_right = box.mapViewToScene(QPointF(3, 3))
    assert top_left.y() < bottom_right.y() and top_left.x() < bottom_right.x()

    # Hovering a cell explains it: coordinates, token ranges, kind.
    view_pos = heat.canvas.mapFromScene(box.mapViewToScene(QPointF(1, 2)))
    qtbot.mouseMove(heat.canvas.viewport(), view_pos)
    qtbot.waitUntil(lambda: heat.hover_text != "")
    assert heat.hover_text == "q-block 2, k-block 1: computed\nqueries 64–95, keys 32–63"
    assert heat.block_text(3, 3) == "q-block 3, k-block 3: masked\nqueries 96–127, keys 96–127"


def test_window_mask_heatmap_counts_and_offset(qtbot: Any, window: Any) -> None:
    small_problem(qtbot, window, seq_lens="128", mask="window", tile=32)
    type_into(qtbot, window.controls.window, "40")
    pick(window.controls.mask, "causal-offset")
    assert window.controls.input_pos.isEnabled() and not window.controls.window.isEnabled()
    pick(window.controls.mask, "window")
    assert window.controls.window.isEnabled()
    type_into(qtbot, window.controls.input_pos, "32")
    run_id = run_and_wait(qtbot, window)
    run = window.store.run(run_id)
    assert run.config.window == 40 and run.problem.input_pos == 32
    expected = Schedule(128, 160, 32, 32, "window", 32, 40)
    assert window.heatmap.facts.counts == expected.counts()
    share = expected.counts()["skipped"] / expected.block_map.size
    assert window.heatmap.facts.skipped_share == pytest.approx(share)
    assert "keys" in window.heatmap.block_text(0, 4)


def test_cursor_readout_shows_values_under_the_mouse(qtbot: Any, window: Any) -> None:
    small_problem(qtbot, window, seq_lens="64,128", label="readout")
    run_id = run_and_wait(qtbot, window)
    point = window.store.points(run_id)[1]
    plots = window.plots
    box = plots.tflops_plot.getViewBox()

    def hover_the_point() -> bool:
        # Mapped again at each try: the views redraw (and rescale) just after the run ends,
        # so a position mapped once can point where the point no longer is.
        scene = box.mapViewToScene(QPointF(math.log2(128), point.tflops))
        qtbot.mouseMove(plots.canvas.viewport(), plots.canvas.mapFromScene(scene))
        return bool(plots.cursor_seq_len == 128)

    qtbot.waitUntil(hover_the_point)
    text = plots.readout.text().replace("&nbsp;", " ")
    assert "N = 128" in text and f"{point.latency_ms:.4g} ms" in text
    assert f"{point.tflops:.4g} TFLOP/s" in text and "readout" in text
    assert all(line.isVisible() for line in plots._cursor_lines)


def test_event_loop_never_stalls_during_a_sweep(qtbot: Any, window: Any) -> None:
    small_problem(qtbot, window, seq_lens="64-1k", mask="none", tile=32, heads=4)
    meter = StallMeter()
    meter.start()
    started = time.perf_counter()
    run_id = run_and_wait(qtbot, window)
    elapsed = time.perf_counter() - started
    meter.stop()
    assert window.store.run(run_id).status == "complete"
    assert len(window.store.points(run_id)) == 5
    # The measurement means something only if the sweep ran for a while.
    assert meter.ticks > 20, f"only {meter.ticks} ticks in {elapsed:.2f} s"
    print(f"gaps over 40 ms (start s, length s): {meter.long_gaps}")
    assert_within(meter.worst_s, 0.100, "the longest event-loop gap during a sweep")


@pytest.fixture
def slow_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each reference point takes at least 0.3 s, so a cancel lands mid-sweep.

    A patch lives in this process only: tests using it run the sweep in the worker thread
    (``window.jobs.sweep_in_child = False``) instead of the child process.
    """
    original = ReferenceBackend.measure_point

    def slow(self: ReferenceBackend, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ReferenceBackend, "measure_point", slow)


@pytest.mark.usefixtures("slow_points")
def test_progress_and_cancel_keep_the_run_as_cancelled(qtbot: Any, window: Any) -> None:
    window.jobs.sweep_in_child = False  # the slow_points patch lives in this process
    small_problem(qtbot, window, seq_lens="64,128,256,512,1024", label="to cancel")
    labels: list[str] = []
    window.jobs.progress_label.setText("")

    click_run(qtbot, window)
    assert window.jobs.is_running() and window.controls.cancel_button.isEnabled()
    assert not window.controls.run_button.isEnabled()
    assert window.jobs.progress.isVisible() and window.jobs.progress.maximum() == 5
    qtbot.waitUntil(lambda: window.jobs.progress.value() >= 1, timeout=20_000)
    labels.append(window.jobs.progress_label.text())
    qtbot.mouseClick(window.controls.cancel_button, Qt.MouseButton.LeftButton)
    assert "Cancelling" in window.jobs.progress_label.text()
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=20_000)

    run_id = window.jobs.last_run_id
    run = window.store.run(run_id)
    done = len(window.store.points(run_id))
    assert run.status == "cancelled"
    assert 1 <= done < 5  # stopped after the point in flight, and kept what it measured
    # The current point and an estimate of the time left, once a point has been timed.
    assert re.search(r"(1/5 done|point 2/5, N = 128)", labels[0]), labels[0]
    assert "left" in labels[0]
    assert window.history.model.index(0, 7).data() == "cancelled"
    assert "cancelled" in window.statusBar().currentMessage()
    assert not window.jobs.progress.isVisible()
    assert window.controls.run_button.isEnabled()
    x, _ = run_curve(window.plots.latency_plot, run_id)
    assert len(x) == done


def test_backend_failure_shows_a_dialog_and_keeps_the_run_failed(
    qtbot: Any, window: Any, dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = ReferenceBackend.measure_point

    def fail_second(self: ReferenceBackend, problem: Any, *args: Any, **kwargs: Any) -> Any:
        if problem.q_len == 128:
            raise BackendError("simulated kernel fault: illegal memory access")
        return original(self, problem, *args, **kwargs)

    monkeypatch.setattr(ReferenceBackend, "measure_point", fail_second)
    window.jobs.sweep_in_child = False  # the patch lives in this process
    small_problem(qtbot, window, seq_lens="64,128,256")
    run_id = run_and_wait(qtbot, window)

    run = window.store.run(run_id)
    assert run.status == "failed" and "illegal memory access" in (run.error or "")
    assert [p.seq_len for p in window.store.points(run_id)] == [64]
    critical = dialogs.texts("critical")
    assert len(critical) == 1
    assert f"Run #{run_id} failed" in critical[0] and "illegal memory access" in critical[0]
    assert window.history.model.index(0, 7).data() == "failed"
    assert window.history.model.index(0, 7).data(Qt.ItemDataRole.ToolTipRole) == run.error
    # The window lives on: another run works.
    monkeypatch.setattr(ReferenceBackend, "measure_point", original)
    assert window.store.run(run_and_wait(qtbot, window)).status == "complete"


def test_bad_values_are_marked_on_their_field(qtbot: Any, window: Any) -> None:
    c = window.controls
    small_problem(qtbot, window, seq_lens="64,abc")
    click_run(qtbot, window)
    assert not window.jobs.is_running()
    assert c.invalid_fields() == ["seq_lens"]
    assert c.seq_lens.property("invalid") is True
    assert c.error_label.isVisible() and c.error_label.text().startswith("Seq lengths: ")
    assert c.seq_lens.toolTip().startswith("Seq lengths: ")
    assert window.store.count_runs() == 0

    # Editing the field is acting on the message: the mark goes.
    type_into(qtbot, c.seq_lens, "64")
    assert c.invalid_fields() == [] and not c.error_label.isVisible()

    # A rule across fields names the field it is about.
    type_into(qtbot, c.heads, "6")
    type_into(qtbot, c.kv_heads, "4")
    click_run(qtbot, window)
    assert c.invalid_fields() == ["kv_heads"]
    assert "divisible" in c.error_label.text()

    type_into(qtbot, c.kv_heads, "0")  # "same as heads"
    type_into(qtbot, c.seq_lens, "100-1k")  # a range needs powers of two
    click_run(qtbot, window)
    assert c.invalid_fields() == ["seq_lens"] and "powers of two" in c.error_label.text()
    assert window.store.count_runs() == 0

    # A rule between knobs names the knob it is about: the persistent grid runs no clusters.
    type_into(qtbot, c.seq_lens, "64")
    pick(c.mask, "none")
    c.persistent.click()
    pick(c.num_ctas, 2)
    click_run(qtbot, window)
    assert c.invalid_fields() == ["persistent"]
    assert "does not run as clusters" in c.error_label.text()
    assert window.store.count_runs() == 0


def test_backend_refusal_before_the_run_marks_the_field(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: ReferenceBackend, problem: Any, config: Any) -> None:
        raise ConfigError("head_dim", problem.head_dim, "this backend supports 64 and 128 only")

    monkeypatch.setattr(ReferenceBackend, "check_supported", refuse)
    window.jobs.sweep_in_child = False
    small_problem(qtbot, window)
    click_run(qtbot, window)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=20_000)
    assert window.controls.invalid_fields() == ["head_dim"]
    assert "64 and 128 only" in window.controls.error_label.text()
    assert window.store.count_runs() == 0


def test_a_store_error_in_the_worker_is_reported_not_fatal(
    qtbot: Any, window: Any, dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def locked(self: Store, *args: Any, **kwargs: Any) -> int:
        raise StoreError(f"{self.path} stayed locked by another writer; try again")

    monkeypatch.setattr(Store, "create_run", locked)
    window.jobs.sweep_in_child = False
    small_problem(qtbot, window)
    click_run(qtbot, window)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=20_000)
    assert any("stayed locked" in text for text in dialogs.texts("critical"))
    assert window.controls.run_button.isEnabled()


def test_run_menu_action_and_escape_cancel(qtbot: Any, window: Any, slow_points: None) -> None:
    window.jobs.sweep_in_child = False
    small_problem(qtbot, window, seq_lens="64,128,256,512")
    window.run_action.trigger()
    assert window.jobs.is_running() and window.cancel_action.isEnabled()
    qtbot.waitUntil(lambda: window.jobs.progress.value() >= 1, timeout=20_000)
    window.cancel_action.trigger()
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=20_000)
    assert window.store.run(window.jobs.last_run_id).status == "cancelled"
    assert not window.cancel_action.isEnabled() and window.run_action.isEnabled()


def test_cancel_reaches_the_sweep_process(qtbot: Any, window: Any) -> None:
    """The default path for the reference backend: the sweep runs in a child process."""
    small_problem(qtbot, window, seq_lens="64-4k", mask="none", label="child cancel")
    click_run(qtbot, window)
    qtbot.waitUntil(
        lambda: window.jobs._worker is not None and window.jobs._worker.child_pid is not None
    )
    child = window.jobs._worker.child_pid
    assert child != os.getpid()
    qtbot.waitUntil(lambda: window.jobs.progress.value() >= 1, timeout=30_000)
    qtbot.mouseClick(window.controls.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=60_000)
    run = window.store.run(window.jobs.last_run_id)
    assert run.status == "cancelled"
    assert 1 <= len(window.store.points(run.id)) < 7


def test_a_dying_sweep_process_leaves_a_failed_run_and_a_dialog(
    qtbot: Any, window: Any, dialogs: Any
) -> None:
    small_problem(qtbot, window, seq_lens="64-4k", mask="none")
    click_run(qtbot, window)
    qtbot.waitUntil(lambda: window.jobs.progress.value() >= 1, timeout=30_000)
    os.kill(window.jobs._worker.child_pid, signal.SIGKILL)  # what the OOM killer would do
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=30_000)
    run = window.store.run(window.jobs.last_run_id)
    assert run.status == "failed" and run.error
    assert len(window.store.points(run.id)) >= 1  # what it measured is kept
    assert any(
        "stopped unexpectedly (killed by signal 9)" in text for text in dialogs.texts("critical")
    )
    assert window.history.model.index(0, 7).data() == "failed"


@pytest.mark.usefixtures("slow_points")
def test_closing_during_a_sweep_asks_and_keeps_the_run(
    qtbot: Any, window: Any, dialogs: Any
) -> None:
    window.jobs.sweep_in_child = False  # the slow_points patch lives in this process
    small_problem(qtbot, window, seq_lens="64,128,256,512,1024")
    click_run(qtbot, window)
    qtbot.waitUntil(lambda: window.jobs.progress.value() >= 1, timeout=20_000)
    store_path = window.store.path
    run_id = window.jobs.last_run_id

    dialogs.question_answer = QMessageBox.StandardButton.No
    window.close()
    assert window.isVisible() and window.jobs.is_running()  # the user changed their mind
    assert "A sweep is running" in dialogs.shown[-1][1]

    dialogs.question_answer = QMessageBox.StandardButton.Yes
    window.close()
    assert not window.isVisible() and not window.jobs.is_running()
    with Store(store_path) as store:
        run = store.run(run_id)
        assert run.status == "cancelled" and 1 <= len(store.points(run_id)) < 5
