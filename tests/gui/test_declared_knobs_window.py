"""A plugin's own knobs in the window (issue #55 item 2): the window started with a plugin file
(``fmha-workbench --plugin FILE gui``) shows the knobs the ticked plugin backend declares, as
widgets built from the declaration, refuses a value against the declaration's rules naming the
knob's label, and runs the backend with the values set in the form."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import click_run, pick, run_and_wait, small_problem, tick_backends, type_into
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QSpinBox

from workbench.gui.form_errors import row_label

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]
NUMPY_EXAMPLE = ROOT / "examples" / "numpy_softcap.py"

RULED = """
from workbench.backends import Capabilities, Knob, Rule, declare

def attention(q, k, v, *, problem, config, knobs):
    return q

BACKENDS = (
    declare(
        "ruled",
        "a plugin with a rule between its knobs",
        attention,
        capabilities=Capabilities(masks=("none", "causal")),
        knobs=(
            Knob("chunk", int, 64, (32, 64, 128), "--plugin-knob chunk", "Chunk", "rows"),
            Knob("unroll", int, 2, tuple(range(1, 9)), "--plugin-knob unroll", "Unroll", "u"),
            Knob("fused", bool, False, (False, True), "--plugin-knob fused", "Fused", "f"),
            Knob("scale", float, 1.0, (0.25, 0.5, 0.75, 1.0, 1.25), "--plugin-knob scale",
                 "Scale", "s"),
        ),
        rules=(
            Rule(
                "unroll", ("mask", "fused"),
                lambda v, m: m == "causal" and v["fused"] and v["unroll"] > 4,
                lambda v, m: "a fused causal pass unrolls 4 or fewer", "a fused causal pass",
            ),
        ),
    ),
)
"""


def test_the_plugins_knobs_show_when_it_is_ticked_and_its_run_carries_the_value_set(
    qtbot: Any, plugin_window: Callable[[Path], Any]
) -> None:
    window = plugin_window(NUMPY_EXAMPLE)
    c = window.controls
    assert not c.declared.isVisibleTo(window)  # the reference declares no knobs of its own
    small_problem(qtbot, window, seq_lens="64,128", mask="causal", label="capped")
    tick_backends(qtbot, c, ["numpy-softcap"])
    assert c.declared.isVisibleTo(window)
    assert "numpy-softcap" in c.declared.title()
    # Below the Kernel group, the new rows are scrolled into view where the user is looking.
    qtbot.waitUntil(lambda: not c.declared.visibleRegion().isEmpty(), timeout=2000)
    # ...and only down: a sideways scroll would cut the first letters of every label off.
    assert c.form_scroll.horizontalScrollBar().value() == 0
    cap = c.declared.widgets["--plugin-knob softcap"]
    rows = c.declared.widgets["--plugin-knob chunk_rows"]
    assert isinstance(cap, QComboBox) and isinstance(rows, QComboBox)
    assert row_label(c, cap) == "Soft cap" and row_label(c, rows) == "Chunk rows"
    assert [cap.itemData(i) for i in range(cap.count())] == [0.0, 20.0, 30.0, 50.0]
    assert cap.currentData() == 0.0 and rows.currentData() == 128  # the declared defaults
    # The speed-only knob says the tuner may choose it; the soft cap, which changes the
    # result, does not.
    assert "Autotune ticked the tuner chooses it" in rows.toolTip()
    assert "Autotune" not in cap.toolTip()

    pick(cap, 30.0)
    pick(rows, 64)
    run_id = run_and_wait(qtbot, window)
    run = window.store.run(run_id)
    assert run.status == "complete" and run.backend == "numpy-softcap", run.error
    assert run.machine["plugin_knobs"] == {"softcap": 30.0, "chunk_rows": 64}
    points = window.store.points(run_id)
    assert [p.seq_len for p in points] == [64, 128]
    for point in points:  # each point ran capped, and matches float64 attention capped alike
        assert point.extra["plugin_knobs"]["softcap"] == 30.0
        assert point.rel_err < 1e-2, point

    tick_backends(qtbot, c, ["reference"])
    assert not c.declared.isVisibleTo(window)
    tick_backends(qtbot, c, ["numpy-softcap"])  # the value set comes back with the backend
    assert c.declared.widgets["--plugin-knob softcap"].currentData() == 30.0

    # Load into form puts the run's own knob values back, after the form moved on.
    pick(c.declared.widgets["--plugin-knob softcap"], 50.0)
    pick(c.declared.widgets["--plugin-knob chunk_rows"], 128)
    tick_backends(qtbot, c, ["reference"])
    window.history.select_runs([run_id])
    qtbot.mouseClick(window.history.load_button, Qt.MouseButton.LeftButton)
    assert c.backends.checked() == ["numpy-softcap"]
    assert c.declared.widgets["--plugin-knob softcap"].currentData() == 30.0
    assert c.declared.widgets["--plugin-knob chunk_rows"].currentData() == 64


def test_a_value_against_the_plugins_rule_names_the_knob_and_writes_nothing(
    qtbot: Any, plugin_window: Callable[[Path], Any], tmp_path: Path
) -> None:
    plugin = tmp_path / "ruled.py"
    plugin.write_text(textwrap.dedent(RULED))
    window = plugin_window(plugin)
    c = window.controls
    small_problem(qtbot, window, seq_lens="64", mask="causal")
    tick_backends(qtbot, c, ["ruled"])
    widgets = c.declared.widgets
    chunk, unroll = widgets["--plugin-knob chunk"], widgets["--plugin-knob unroll"]
    fused = widgets["--plugin-knob fused"]
    # Choices are a combo, an evenly spaced run of whole numbers a spin box, a switch a box.
    assert isinstance(chunk, QComboBox) and chunk.currentData() == 64
    assert isinstance(unroll, QSpinBox) and (unroll.minimum(), unroll.maximum()) == (1, 8)
    assert unroll.value() == 2
    assert isinstance(fused, QCheckBox) and not fused.isChecked()
    scale = widgets["--plugin-knob scale"]  # a run of quarters: a spin box that shows them
    assert isinstance(scale, QDoubleSpinBox) and scale.value() == 1.0
    assert (scale.minimum(), scale.maximum(), scale.singleStep()) == (0.25, 1.25, 0.25)
    assert scale.textFromValue(0.75) == "0.75"
    assert row_label(c, fused) == "Fused" and row_label(c, unroll) == "Unroll"

    fused.click()
    assert fused.isChecked()
    type_into(qtbot, unroll, "6")
    click_run(qtbot, window)
    said = c.error_label.text()
    assert not window.jobs.is_running()
    assert said == "Unroll: 6: a fused causal pass unrolls 4 or fewer", said
    assert c.invalid_fields() == ["--plugin-knob unroll"]
    assert unroll.toolTip() == said
    assert window.store.count_runs() == 0

    scale.setFocus()
    scale.lineEdit().selectAll()
    qtbot.keyClicks(scale.lineEdit(), "0.6")  # between the steps: not one of its values
    scale.interpretText()
    click_run(qtbot, window)
    said = c.error_label.text()
    assert said == "Scale: 0.6: expected one of 0.25, 0.5, 0.75, 1.0, 1.25", said
    assert c.invalid_fields() == ["--plugin-knob scale"]
    assert window.store.count_runs() == 0
    scale.setValue(0.5)

    type_into(qtbot, unroll, "4")  # editing the marked knob drops the mark
    assert c.invalid_fields() == []
    pick(c.mask, "none")
    type_into(qtbot, unroll, "8")  # the rule holds under a causal mask only
    c.declared.check(c.spec().config.mask)


def test_a_value_head_dim_the_plugin_cannot_run_is_refused_on_the_head_dim_v_row(
    qtbot: Any, plugin_window: Callable[[Path], Any]
) -> None:
    """Issue #52: the backend's own refusal of Dv, from the engine child, marks "Head dim V"."""
    window = plugin_window(NUMPY_EXAMPLE)
    c = window.controls
    small_problem(qtbot, window, seq_lens="64", mask="none")
    pick(c.head_dim, 192)
    pick(c.head_dim_v, 128)
    tick_backends(qtbot, c, ["numpy-softcap"])
    click_run(qtbot, window)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=30_000)
    said = c.error_label.text()
    assert c.invalid_fields() == ["head_dim_v"], said
    assert said.startswith("Head dim V: 128: numpy-softcap runs V at the query/key head dim"), said
    assert window.store.count_runs() == 0


def test_a_plugin_knob_set_in_the_form_is_there_again_after_a_restart(
    qtbot: Any, plugin_window: Callable[[Path], Any], settings: QSettings
) -> None:
    window = plugin_window(NUMPY_EXAMPLE)
    tick_backends(qtbot, window.controls, ["numpy-softcap"])
    pick(window.controls.declared.widgets["--plugin-knob softcap"], 20.0)
    window.close()  # closeEvent saves the form
    settings.sync()

    again = plugin_window(NUMPY_EXAMPLE)  # the saved ticks and knob values apply after the probe
    c = again.controls
    qtbot.waitUntil(lambda: c.backends.checked() == ["numpy-softcap"], timeout=5000)
    assert c.declared.widgets["--plugin-knob softcap"].currentData() == 20.0
    assert c.declared.widgets["--plugin-knob chunk_rows"].currentData() == 128


def test_the_compiled_line_says_when_no_ticked_backend_runs_our_kernel(
    qtbot: Any, plugin_window: Callable[[Path], Any]
) -> None:
    """With only a plugin ticked the form's compiled line does not describe our kernel's
    config as if it would run; ticking the reference (our kernel's schedule) brings it back."""
    window = plugin_window(NUMPY_EXAMPLE)
    c, line = window.controls, window.explain.compiled.text
    small_problem(qtbot, window, seq_lens="64")
    tick_backends(qtbot, c, ["numpy-softcap"])
    qtbot.waitUntil(
        lambda: "none of the ticked backends runs our kernel" in line.text(), timeout=5000
    )
    tick_backends(qtbot, c, ["reference", "numpy-softcap"])
    qtbot.waitUntil(lambda: "none of the ticked" not in line.text(), timeout=5000)
