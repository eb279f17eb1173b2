"""Issue 39's numbers in the window: the reference backend's BLAS threads, the time left and
the Ladder tab's noise rule, as a user reads them."""

from __future__ import annotations

from typing import Any

import pytest
from gui_helpers import run_and_wait, small_problem

pytestmark = pytest.mark.gui


def test_a_window_sweep_records_the_same_blas_policy_as_the_cli(qtbot: Any, window: Any) -> None:
    small_problem(qtbot, window, seq_lens="64,128")
    run_id = run_and_wait(qtbot, window)
    run = window.store.run(run_id)
    assert run.status == "complete"
    assert run.machine["blas_threads"] == 1  # what the CLI's sweep records too
