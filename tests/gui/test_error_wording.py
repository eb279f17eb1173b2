"""The window's refusals name the field as the form labels it, not the core's field names."""

from __future__ import annotations

from typing import Any

from gui_helpers import click_run, pick, small_problem, type_into


def test_a_bad_length_names_the_form_row_not_seq_lens(qtbot: Any, window: Any) -> None:
    c = window.controls
    small_problem(qtbot, window, seq_lens="64,abc")
    click_run(qtbot, window)
    said = c.error_label.text()
    assert said.startswith("Seq lengths: '") and "abc" in said, said
    assert "seq_lens" not in said and "--seq-lens" not in said
    assert window.statusBar().currentMessage() == said
    assert c.seq_lens.toolTip() == said
    assert window.store.count_runs() == 0


def test_a_knob_refusal_names_the_knob_by_its_label(qtbot: Any, window: Any) -> None:
    c = window.controls
    small_problem(qtbot, window, seq_lens="64")
    pick(c.mask, "none")
    c.persistent.click()
    pick(c.num_ctas, 2)
    click_run(qtbot, window)
    said = c.error_label.text()
    assert c.invalid_fields() == ["persistent"]
    assert said.startswith(c.persistent.text() + ": "), said
    assert "persistent:" not in said


def test_a_problem_refusal_names_its_row(qtbot: Any, window: Any) -> None:
    c = window.controls
    small_problem(qtbot, window, seq_lens="64")
    type_into(qtbot, c.heads, "6")
    type_into(qtbot, c.kv_heads, "4")
    click_run(qtbot, window)
    said = c.error_label.text()
    assert c.invalid_fields() == ["kv_heads"]
    assert said.startswith("KV heads: "), said
    assert "kv_heads" not in said
