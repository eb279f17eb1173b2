"""User code cannot take the window down (issue 55 item 4): a plugin that hangs in its launch is
ended by Cancel (the run stored cancelled, the window answering throughout), and one that
segfaults ends its run failed with the reason stored; after either, the window runs again."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import StallMeter, run_and_wait, small_problem, tick_backends
from PySide6.QtCore import Qt
from test_plugin_window import no_plugins_left  # noqa: F401  (its fixture)

pytestmark = pytest.mark.gui

PLUGIN = """
import ctypes
import time

from workbench.backends import declare


def attention(q, k, v, *, problem, config, knobs):
    if HOW == "hang":
        time.sleep(600)
    ctypes.string_at(0)  # a read of address 0: SIGSEGV in the process that runs it
    return q


HOW = {how!r}
BACKENDS = (declare("unruly", "a plugin that hangs or crashes", attention),)
"""
CANCEL_BOUND_S = 15.0  # the engine child is killed, not waited for; 2 busy CI cores
STALL_BOUND_S = 1.0  # the longest gap between the window's 10 ms ticks


def _open(qtbot: Any, plugin_window: Any, tmp_path: Path, how: str) -> Any:
    path = tmp_path / "unruly.py"
    path.write_text(textwrap.dedent(PLUGIN.format(how=how)))
    window = plugin_window(path)
    tick_backends(qtbot, window.controls, ["unruly"])
    small_problem(qtbot, window, seq_lens="64")
    return window


def _runs_again(qtbot: Any, window: Any) -> None:
    tick_backends(qtbot, window.controls, ["reference"])
    again = window.store.run(run_and_wait(qtbot, window))
    # ...and History lists it: the window's connection still sees what a child wrote.
    assert window.history.model.rowCount() == 2
    assert (again.backend, again.status) == ("reference", "complete"), again.error


def test_cancel_ends_a_plugin_that_hangs_and_the_window_answers_throughout(
    qtbot: Any, plugin_window: Any, tmp_path: Path, dialogs: Any
) -> None:
    window = _open(qtbot, plugin_window, tmp_path, "hang")
    qtbot.mouseClick(window.controls.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.jobs.is_running(), timeout=10_000)
    qtbot.wait(1500)  # inside the plugin's sleep by now
    stalls = StallMeter()  # the event loop keeps turning while the plugin hangs
    stalls.start()
    qtbot.wait(500)
    started = time.monotonic()
    qtbot.mouseClick(window.controls.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=int(CANCEL_BOUND_S * 1000))
    assert time.monotonic() - started < CANCEL_BOUND_S
    stalls.stop()
    assert stalls.ticks > 20 and stalls.worst_s < STALL_BOUND_S, stalls.long_gaps
    run = window.store.run(window.jobs.last_run_id)
    assert run.status == "cancelled", run
    assert "critical" not in dialogs.kinds()
    assert window.controls.run_button.isEnabled()
    _runs_again(qtbot, window)


def test_a_plugin_that_segfaults_fails_its_run_with_the_reason_and_the_window_stays(
    qtbot: Any, plugin_window: Any, tmp_path: Path
) -> None:
    window = _open(qtbot, plugin_window, tmp_path, "segfault")
    run = window.store.run(run_and_wait(qtbot, window))
    assert run.status == "failed", run
    assert "exit code -11" in (run.error or ""), run.error  # SIGSEGV, in the child
    assert window.isVisible()
    _runs_again(qtbot, window)
