"""The window's block-map view of a plugin's run (issue 55 item 2): the map drawn is the one the
plugin reported, in its own blocks, and the view says "reported by the plugin"; a plugin that
reports none is said to show the tile schedule's model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gui_helpers import pick, run_and_wait, small_problem, tick_backends

pytestmark = pytest.mark.gui

NUMPY_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "numpy_softcap.py"


def run_plugin(qtbot: Any, window: Any, name: str, chunk: int) -> int:
    c = window.controls
    small_problem(qtbot, window, seq_lens="160,256", mask="causal", tile=64)
    tick_backends(qtbot, c, [name])
    pick(c.declared.widgets["--plugin-knob chunk_rows"], chunk)
    run_id = run_and_wait(qtbot, window)
    run = window.store.run(run_id)
    assert (run.backend, run.status) == (name, "complete"), run.error
    window.history.select_runs([run_id])
    window.tabs.setCurrentWidget(window.heatmap)
    qtbot.waitUntil(lambda: window.heatmap.run is not None and window.heatmap.run.id == run_id)
    return run_id


def test_the_block_map_view_draws_the_plugins_reported_map_and_says_so(
    qtbot: Any, plugin_window: Callable[[Path], Any]
) -> None:
    window = plugin_window(NUMPY_EXAMPLE)
    run_id = run_plugin(qtbot, window, "numpy-softcap", 32)
    heatmap = window.heatmap
    heatmap.select_seq_len(160)
    grid = heatmap.current_grid()
    assert grid is not None
    # 160 rows in chunks of 32 (the plugin's blocks, not the form's 64x64 tiles): 5x5, the
    # blocks right of the diagonal skipped, the diagonal computed under the mask.
    expected = np.tril(np.ones((5, 5), dtype=np.int8)) + np.eye(5, dtype=np.int8)
    np.testing.assert_array_equal(grid, expected)
    np.testing.assert_array_equal(grid, window.store.block_map(run_id, 160))
    assert heatmap.facts is not None
    assert heatmap.facts.counts == {"computed": 10, "masked": 5, "skipped": 10}
    summary = heatmap.summary.text()
    assert "5 × 5 blocks of 32 × 32" in summary, summary
    assert "Block map: reported by the plugin, blocks of 32×32." in summary, summary
    assert "reported by the plugin" in heatmap.title.toolTip()
    assert heatmap.block_text(4, 1) == "q-block 4, k-block 1: computed\nqueries 128–159, keys 32–63"


def test_the_block_map_view_of_a_plugin_without_a_report_says_it_is_the_schedules_model(
    qtbot: Any, plugin_window: Callable[[Path], Any], tmp_path: Path
) -> None:
    plain = tmp_path / "plain_softcap.py"
    text = NUMPY_EXAMPLE.read_text()
    plain.write_text(
        text.replace("        block_map=block_map,\n", "").replace('"numpy-softcap"', '"plain"')
    )
    window = plugin_window(plain)
    run_plugin(qtbot, window, "plain", 32)
    heatmap = window.heatmap
    heatmap.select_seq_len(256)
    assert heatmap.current_grid().shape == (4, 4)  # the form's 64x64 tiles: the schedule's
    summary = heatmap.summary.text()
    assert "Block map: the tile schedule's model (the plugin reports none)." in summary, summary
    assert "reported by the plugin" not in summary
    assert heatmap.title.toolTip().endswith("the tile schedule's model (the plugin reports none).")
