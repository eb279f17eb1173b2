"""The value head dim in the window's form (issue #52): a "Head dim V" row beside "Head dim",
"same as D" unless set, its values the one head-dim list; the run it starts carries Dv, and
History and Compare say D/Dv where they differ."""

from __future__ import annotations

from typing import Any

import pytest
from gui_helpers import pick, run_and_wait, small_problem

from workbench.config import HEAD_DIMS
from workbench.gui.controls import SAME_AS_D
from workbench.gui.form_errors import row_label
from workbench.gui.history_model import COL_CONFIG

pytestmark = pytest.mark.gui


def history_config_cell(window: Any, run_id: int) -> str:
    model = window.history.model
    row = model.row_of(run_id)
    assert row is not None, f"run #{run_id} is not in History"
    return str(model.index(row, COL_CONFIG).data())


def test_the_head_dim_v_row_offers_same_as_d_then_the_head_dims(window: Any) -> None:
    box = window.controls.head_dim_v
    assert row_label(window.controls, box) == "Head dim V"
    entries = [(box.itemText(i), box.itemData(i)) for i in range(box.count())]
    assert entries[0] == (SAME_AS_D, 0)
    assert [data for _, data in entries[1:]] == list(HEAD_DIMS)
    assert box.currentText() == SAME_AS_D
    assert window.controls.spec().problem.head_dim_v is None


def test_d192_dv128_runs_on_the_reference_and_history_shows_d192_128(
    qtbot: Any, window: Any
) -> None:
    c = window.controls
    small_problem(qtbot, window, seq_lens="64", mask="none", tile=32, label="mla")
    pick(c.head_dim, 192)
    pick(c.head_dim_v, 128)
    split_id = run_and_wait(qtbot, window)
    run = window.store.run(split_id)
    assert run.status == "complete", run.error
    assert (run.problem.head_dim, run.problem.value_dim) == (192, 128)
    assert "D192/128" in history_config_cell(window, split_id)

    # The same problem with Dv left "same as D": History says D192 alone, and Compare warns
    # that the two runs solve different problems, naming both value widths.
    pick(c.head_dim_v, 0)
    same_id = run_and_wait(qtbot, window)
    assert window.store.run(same_id).problem.head_dim_v is None
    cell = history_config_cell(window, same_id)
    assert "D192 " in cell and "D192/" not in cell
    window.tabs.setCurrentWidget(window.compare)
    window.history.select_runs([split_id, same_id])
    banner = window.compare.banner
    qtbot.waitUntil(lambda: banner.isVisible() and "128" in banner.text(), timeout=5000)
    assert f"#{split_id} 128" in banner.text() and f"#{same_id} 192" in banner.text()


def test_loading_a_run_back_puts_its_head_dim_v_in_the_form(qtbot: Any, window: Any) -> None:
    c = window.controls
    small_problem(qtbot, window, seq_lens="64", mask="none", tile=32)
    pick(c.head_dim, 192)
    pick(c.head_dim_v, 128)
    run_id = run_and_wait(qtbot, window)
    pick(c.head_dim_v, 0)
    pick(c.head_dim, 64)
    window.history.select_runs([run_id])
    window.history.load_button.click()
    assert (c.head_dim.currentData(), c.head_dim_v.currentData()) == (192, 128)
    assert c.head_dim_v.currentText() == "128"
