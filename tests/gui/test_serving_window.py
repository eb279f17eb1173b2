"""A ragged paged decode from the window on the reference backend: the lengths typed into the
form's ragged-batch row, Run pressed, the run in History with its batch's summary; a bad length
refused naming the field, nothing stored."""

from __future__ import annotations

from typing import Any

import pytest
from gui_helpers import pick, run_and_wait, type_into
from PySide6.QtCore import Qt

pytestmark = pytest.mark.gui


def test_a_ragged_paged_decode_runs_from_the_window(qtbot: Any, window: Any) -> None:
    c = window.controls
    type_into(qtbot, c.heads, "4")
    type_into(qtbot, c.kv_heads, "2")
    pick(c.head_dim, 32)
    pick(c.decode.axis, "k_len")
    type_into(qtbot, c.decode.q_len, "1")
    type_into(qtbot, c.seq_lens, "100")
    type_into(qtbot, c.serving.lengths, "40,0,17,100")
    pick(c.serving.kv_cache, "paged")
    pick(c.serving.page_size, 16)
    run_id = run_and_wait(qtbot, window)
    run = window.store.run(run_id)
    assert run.status == "complete" and run.problem.lengths == (40, 0, 17, 100)
    (point,) = window.store.points(run_id)
    assert point.lengths == (40, 0, 17, 100) and point.page_size == 16
    assert point.rel_err is not None and point.rel_err < 1e-2
    shown = [window.history.model.index(0, col).data() for col in range(8)]
    assert any("ragged 4× 0–100 (mean 39) P16 H4/2 D32" in str(cell) for cell in shown), shown
    # The x axis says what a ragged run's length is: its batch's longest sequence.
    x_label = window.plots.latency_plot.getAxis("bottom").labelText
    assert x_label == "longest sequence's key length k_len", x_label

    # Load into form puts the ragged batch back, cache and page size included.
    type_into(qtbot, c.serving.lengths, "")
    pick(c.serving.kv_cache, "contiguous")
    window.history.select_runs([run_id])
    qtbot.mouseClick(window.history.load_button, Qt.MouseButton.LeftButton)
    assert c.serving.lengths.text() == "40,0,17,100"
    assert c.serving.kv_cache.currentData() == "paged" and c.serving.page_size.currentData() == 16
    assert c.spec().problem == run.problem


def test_the_cache_and_page_size_are_greyed_out_until_they_apply(qtbot: Any, window: Any) -> None:
    s = window.controls.serving
    assert not s.kv_cache.isEnabled() and not s.page_size.isEnabled()  # a uniform batch
    type_into(qtbot, s.lengths, "300,30000")
    assert s.kv_cache.isEnabled() and s.page_size.isEnabled()
    pick(s.kv_cache, "contiguous")
    assert s.kv_cache.isEnabled() and not s.page_size.isEnabled()
    type_into(qtbot, s.lengths, "")
    assert not s.kv_cache.isEnabled()


def test_a_bad_length_in_the_window_is_refused_naming_the_field(qtbot: Any, window: Any) -> None:
    c = window.controls
    type_into(qtbot, c.serving.lengths, "40,-3")
    with pytest.raises(Exception) as refused:
        c.spec()
    assert refused.value.form_message().startswith("Lengths '40,-3': a length of -3")
    assert window.store.runs() == []
