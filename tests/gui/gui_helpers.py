"""What a user does with the form, as small functions the GUI tests share."""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QComboBox, QLineEdit, QSpinBox

RUN_TIMEOUT_MS = 60_000
# A user-facing time bound (the window shows within 2 s, no stall over 250 ms) is what the app
# promises on a desktop; as an exact assertion on a loaded 2-core CI box it flakes. Tests assert
# the bound times this slack and print the measurement against the bound itself;
# FMHA_WORKBENCH_STRICT_TIMING=1 (a benchmark run on a quiet machine) asserts the bound.
TIME_SLACK = float(os.environ.get("FMHA_WORKBENCH_TIME_SLACK", "4"))


def assert_within(measured_s: float, user_bound_s: float, what: str) -> None:
    """``what`` took ``measured_s``: within ``user_bound_s`` × TIME_SLACK (the bound itself
    under FMHA_WORKBENCH_STRICT_TIMING=1); the measurement is printed either way."""
    strict = os.environ.get("FMHA_WORKBENCH_STRICT_TIMING", "") not in ("", "0")
    limit = user_bound_s if strict else user_bound_s * TIME_SLACK
    verdict = "within" if measured_s <= user_bound_s else "OVER"
    bound_ms = f"{user_bound_s * 1e3:.0f} ms"
    print(f"benchmark: {what}: {measured_s * 1e3:.0f} ms ({verdict} the {bound_ms} bound)")
    assert measured_s < limit, (
        f"{what} took {measured_s * 1e3:.0f} ms; the user-facing bound is "
        f"{user_bound_s * 1e3:.0f} ms, the test's limit {limit * 1e3:.0f} ms"
    )


def type_into(qtbot: Any, widget: QLineEdit | QSpinBox, text: str) -> None:
    """Select everything in the field and type ``text``, as a user would."""
    widget.setFocus()
    line = widget if isinstance(widget, QLineEdit) else widget.lineEdit()
    line.selectAll()
    qtbot.keyClick(line, Qt.Key.Key_Backspace)
    qtbot.keyClicks(line, text)
    if isinstance(widget, QSpinBox):
        widget.interpretText()


def pick(combo: QComboBox, data: Any) -> None:
    """Choose the entry whose data is ``data`` (what clicking it in the popup does)."""
    index = combo.findData(data)
    assert index >= 0, f"{combo.objectName()} has no entry {data!r}"
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def tick_backends(qtbot: Any, controls: Any, names: list[str]) -> None:
    """Tick exactly ``names`` in the backend picker by clicking rows' check boxes, as a user."""
    from PySide6.QtWidgets import QStyle, QStyleOptionViewItem

    picker = controls.backends
    for row in range(picker.count()):
        item = picker.item(row)
        name = item.data(Qt.ItemDataRole.UserRole)
        if (item.checkState() == Qt.CheckState.Checked) == (name in names):
            continue
        picker.scrollToItem(item)
        option = QStyleOptionViewItem()
        picker.initViewItemOption(option)
        option.rect = picker.visualItemRect(item)
        option.features |= QStyleOptionViewItem.ViewItemFeature.HasCheckIndicator
        box = picker.style().subElementRect(
            QStyle.SubElement.SE_ItemViewItemCheckIndicator, option, picker
        )
        qtbot.mouseClick(picker.viewport(), Qt.MouseButton.LeftButton, pos=box.center())
    assert picker.checked() == [n for n in picker.names() if n in names], picker.checked()


def small_problem(
    qtbot: Any,
    window: Any,
    *,
    seq_lens: str = "64,128",
    mask: str = "causal",
    tile: int = 32,
    label: str = "",
    heads: int = 2,
) -> None:
    """Batch 1, the given heads, head dim 32, float16: fast enough for two CI cores."""
    c = window.controls
    type_into(qtbot, c.batch, "1")
    type_into(qtbot, c.heads, str(heads))
    pick(c.head_dim, 32)
    pick(c.dtype, "float16")
    type_into(qtbot, c.seq_lens, seq_lens)
    pick(c.tile_m, tile)
    pick(c.tile_n, tile)
    pick(c.mask, mask)
    type_into(qtbot, c.label, label)


def click_run(qtbot: Any, window: Any) -> None:
    qtbot.mouseClick(window.controls.run_button, Qt.MouseButton.LeftButton)


def run_and_wait(qtbot: Any, window: Any, timeout_ms: int = RUN_TIMEOUT_MS) -> int:
    """Click Run and wait until the worker is done; returns the new run's id."""
    click_run(qtbot, window)
    assert window.jobs.is_running(), "Run did not start: " + window.controls.error_label.text()
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=timeout_ms)
    assert window.jobs.last_run_id is not None
    return window.jobs.last_run_id


class StallMeter:
    """A 10 ms QTimer in the GUI thread that records the longest gap between its ticks.

    While the event loop is free the gaps stay near 10 ms; anything that blocks the GUI
    thread (a sweep in the wrong thread, a slow slot) shows up as a long gap.
    """

    def __init__(self) -> None:
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)
        self.ticks = 0
        self.worst_s = 0.0
        self.long_gaps: list[tuple[float, float]] = []  # (start since start(), gap) over 40 ms
        self._last: float | None = None
        self._started = 0.0

    def _tick(self) -> None:
        now = time.perf_counter()
        if self._last is not None:
            gap = now - self._last
            self.worst_s = max(self.worst_s, gap)
            if gap > 0.040:
                self.long_gaps.append((round(self._last - self._started, 3), round(gap, 3)))
        self._last = now
        self.ticks += 1

    def start(self) -> None:
        # In a full test run the heap holds everything earlier tests left alive, and one full
        # garbage collection over it outlasts any stall the app itself causes (120-180 ms seen).
        # The app's own heap is small: freeze the older objects so only new ones are collected.
        gc.collect()
        gc.freeze()
        self._last = None
        self._started = time.perf_counter()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()
        gc.unfreeze()


def seed_run(
    store: Any,
    *,
    label: str = "",
    seq_lens: tuple[int, ...] = (64, 128),
    samples_ms: dict[int, tuple[float, ...]] | None = None,
    machine: dict[str, Any] | None = None,
    mask: str = "none",
    status: str = "complete",
    group_id: int | None = None,
    step: str | None = None,
    autotune: bool = False,
    launches: dict[int, dict[str, Any]] | None = None,
    heads: int = 2,
    backend: str = "reference",
    turn_sizes: dict[int, tuple[int, ...]] | None = None,
) -> int:
    """A stored run with chosen timings, written through the store's own API.

    ``group_id`` and ``step`` make it a step of a stored ladder (or another group).
    ``autotune`` marks the run's config autotuned; ``launches`` gives lengths the
    ``extra["launch"]`` record the cuTile backend stores (the launch the tuner chose).
    ``samples_ms`` gives each length's raw samples, so latencies and p20–p80 spreads are
    exact; lengths without samples get (1.0, 1.0, 1.0) ms scaled by (N / 64)².
    ``turn_sizes`` splits a length's samples into turns, as a timed group records them: the
    point then stores its median's noise (Compare's threshold) as a measured point does.
    """
    import numpy as np

    from workbench.backends.base import PointResult, problem_flops, schedule_for
    from workbench.config import KernelConfig, Problem, SweepSpec
    from workbench.measure.accuracy import AccuracyReport
    from workbench.measure.timing import TimingStats, timing_facts

    problem = Problem(batch=1, heads=heads, head_dim=32)
    config = KernelConfig(tile_m=32, tile_n=32, mask=mask, autotune=autotune)
    spec = SweepSpec(problem, seq_lens, config, backend=backend, label=label)
    run_id = store.create_run(
        spec,
        machine if machine is not None else {"hostname": "here"},
        group_id=group_id,
        step=step,
    )
    for n in seq_lens:
        p = problem.with_seq_len(n)
        default = tuple(s * (n / 64) ** 2 for s in (1.0, 1.0, 1.0))
        launch = (launches or {}).get(n)
        # The block map is the launch's: an autotuned point's grid has the tuner's tiles.
        tiles = {"tile_m": launch["tile_m"], "tile_n": launch["tile_n"]} if launch else {}
        map_config = dataclasses.replace(config, **tiles)
        sizes = (turn_sizes or {}).get(n, ())
        timing = TimingStats((samples_ms or {}).get(n, default), turn_sizes=sizes)
        facts = timing_facts(timing) if sizes else {}
        result = PointResult(
            problem=p,
            timing=timing,
            compile_s=0.01,
            accuracy=AccuracyReport(1e-4, 1e-4, n, 1e-2),
            block_map=np.asarray(schedule_for(p, map_config).block_map, dtype=np.int8),
            flops=problem_flops(p, config),
            extra={**facts, **({"launch": launch} if launch else {})},
        )
        store.add_point(run_id, result)
    store.finish_run(run_id, status)
    return run_id


def clone_runs(store: Any, template_id: int, count: int, label: str = "run {i:05d}") -> None:
    """``count`` more runs like ``template_id`` (no points), in one transaction: a big history.

    Writes the store's own row format (copied from the template) because thousands of
    create_run transactions would take most of a CI minute.
    """
    template = dict(store.db["runs"].get(template_id))
    first = template_id + 1
    rows = [
        dict(template, id=i, label=label.format(i=i), status="complete")
        for i in range(first, first + count)
    ]
    with store.db.conn:
        store.db["runs"].insert_all(rows, batch_size=1000)


def row_rect_center(table: Any, row: int, col: int = 1) -> Any:
    """Viewport position of a table cell's centre, for clicking it."""
    index = table.model().index(row, col)
    table.scrollTo(index)
    return table.visualRect(index).center()


def export_and_wait(qtbot: Any, window: Any, timeout_ms: int = RUN_TIMEOUT_MS) -> None:
    """File › Export CSV…, then wait, as the user does, until its progress dialog has gone."""
    window.export_csv_action.trigger()
    qtbot.waitUntil(lambda: not window.history.csv_job.is_running(), timeout=timeout_ms)
