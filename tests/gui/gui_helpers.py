"""What a user does with the form, as small functions the GUI tests share."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QComboBox, QLineEdit, QSpinBox

RUN_TIMEOUT_MS = 60_000


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
    assert window.is_running(), "Run did not start: " + window.controls.error_label.text()
    qtbot.waitUntil(lambda: not window.is_running(), timeout=timeout_ms)
    assert window.last_run_id is not None
    return window.last_run_id


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
        self._last = None
        self._started = time.perf_counter()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()
