"""Issue 39's numbers in the window: the reference backend's BLAS threads, the time left and
the Ladder tab's noise rule, as a user reads them."""

from __future__ import annotations

from typing import Any

import pytest
from gui_helpers import click_run, run_and_wait, small_problem

pytestmark = pytest.mark.gui


def test_a_window_sweep_records_the_same_blas_policy_as_the_cli(qtbot: Any, window: Any) -> None:
    small_problem(qtbot, window, seq_lens="64,128")
    run_id = run_and_wait(qtbot, window)
    run = window.store.run(run_id)
    assert run.status == "complete"
    assert run.machine["blas_threads"] == 1  # what the CLI's sweep records too


def test_the_time_left_counts_down_through_a_long_point(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said the same 'about 0 s left' through a whole 8k point; now it counts down."""
    import re
    import time

    from workbench.backends.reference import ReferenceBackend

    original = ReferenceBackend.measure_point

    def slow(self: ReferenceBackend, *args: Any, **kwargs: Any) -> Any:
        time.sleep(2.5)  # each point a few seconds, like a long reference point
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ReferenceBackend, "measure_point", slow)
    window.jobs.sweep_in_child = False  # the patch lives in this process
    small_problem(qtbot, window, seq_lens="64,128,256")
    seen: list[str] = []
    window.jobs.progress_label.setText("")
    click_run(qtbot, window)
    while window.jobs.is_running():
        qtbot.wait(100)
        text = window.jobs.progress_label.text()
        if not seen or seen[-1] != text:
            seen.append(text)
    during = [t for t in seen if "point 2/3" in t and " left" in t]
    lefts = [int(m.group(1)) for t in during if (m := re.search(r"about (\d+) s left", t))]
    assert len(set(lefts)) >= 2, seen  # it moved during the point
    assert lefts == sorted(lefts, reverse=True), seen  # and only down
