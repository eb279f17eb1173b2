"""Autotuned runs show what the tuner launched: in the plot readout and the Config tooltip."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import seed_run
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QApplication, QToolTip

from workbench.gui.history import COL_CONFIG
from workbench.store import Store

pytestmark = pytest.mark.gui

# The records the cuTile backend stores in extra["launch"] (keys as the kernel takes them).
SMALL = {
    "tile_m": 64,
    "tile_n": 128,
    "occupancy": 2,
    "num_worker_warps": None,
    "num_ctas": None,
    "k_latency": 3,
    "v_latency": 6,
    "poly_exp2_cols": 0,
    "store_tma": True,
}
CLUSTER = {
    "tile_m": 128,
    "tile_n": 128,
    "occupancy": 2,
    "num_worker_warps": None,
    "num_ctas": 2,
    "k_latency": 2,
    "v_latency": 4,
    "poly_exp2_cols": 0,
    "store_tma": True,
}


@pytest.fixture
def runs(db_path: Path) -> dict[str, int]:
    """An autotuned run with launch records, the same records on a plain run, and an
    autotuned run without records (a peer backend such as torch-cudnn)."""
    launches = {64: SMALL, 128: CLUSTER}
    with Store(db_path) as store:
        return {
            "tuned": seed_run(store, label="tuned", autotune=True, launches=launches),
            "plain": seed_run(store, label="plain", launches=launches),
            "peer": seed_run(store, label="peer", autotune=True),
        }


def plain_text(html: str) -> str:
    return html.replace("&nbsp;", " ")


def readout_at(qtbot: Any, window: Any, run_id: int, seq_len: int) -> str:
    window.history.select_runs([run_id])
    qtbot.waitUntil(lambda: window.plots.run_ids() == [run_id])
    window.plots.show_readout_at(math.log2(seq_len))
    return plain_text(window.plots.readout.text())


def hover_tooltip(qtbot: Any, window: Any, run_id: int) -> str:
    """Hover the run's Config cell the way Qt asks for a tooltip, and read what pops up."""
    table = window.history.table
    index = window.history.model.index(window.history.model.row_of(run_id), COL_CONFIG)
    table.scrollTo(index)
    pos = table.visualRect(index).center()
    QToolTip.hideText()
    event = QHelpEvent(QEvent.Type.ToolTip, pos, table.viewport().mapToGlobal(pos))
    QApplication.sendEvent(table.viewport(), event)
    return QToolTip.text() if QToolTip.isVisible() else ""


def test_readout_names_the_tuned_launch_of_an_autotuned_point(
    qtbot: Any, make_window: Any, runs: dict[str, int]
) -> None:
    window = make_window()
    text = readout_at(qtbot, window, runs["tuned"], 128)
    assert "N = 128" in text and "TFLOP/s, tuned 128×128 occ 2 cluster 2" in text
    assert "lat" not in text  # the default latencies are not spelled out
    text = readout_at(qtbot, window, runs["tuned"], 64)
    assert "tuned 64×128 occ 2 lat 3/6" in text


@pytest.mark.parametrize("which", ["plain", "peer"])
def test_readout_adds_nothing_without_autotune_or_launch_records(
    qtbot: Any, make_window: Any, runs: dict[str, int], which: str
) -> None:
    window = make_window()
    text = readout_at(qtbot, window, runs[which], 128)
    assert "TFLOP/s" in text and "tuned" not in text


def test_config_tooltip_lists_the_tuned_launch_per_length(
    qtbot: Any, make_window: Any, runs: dict[str, int]
) -> None:
    window = make_window()
    tip = hover_tooltip(qtbot, window, runs["tuned"])
    lines = tip.splitlines()
    assert "32×32 none fast-math k-split remap autotune" in lines[0]  # the nominal config first
    assert lines[1:] == [
        "Tuned per sequence length:",
        "N=64: 64×128 occ 2 lat 3/6",
        "N=128: 128×128 occ 2 cluster 2",
    ]
    for which in ("plain", "peer"):
        tip = hover_tooltip(qtbot, window, runs[which])
        assert tip and "Tuned" not in tip and "N=" not in tip
    model = window.history.model
    assert (
        model.index(model.row_of(runs["plain"]), COL_CONFIG).data(Qt.ItemDataRole.ToolTipRole)
        == model.index(model.row_of(runs["plain"]), COL_CONFIG).data()
    )


def test_the_block_map_of_a_tuned_point_names_the_tiles_it_launched(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    with Store(db_path) as store:  # the form said 32×32; the tuner launched 64×128 at N=256
        run_id = seed_run(store, seq_lens=(256,), autotune=True, launches={256: SMALL})
    window = make_window()
    window.tabs.setCurrentWidget(window.heatmap)
    window.history.select_runs([run_id])
    panel = window.heatmap
    qtbot.waitUntil(lambda: panel.current_grid() is not None)
    assert panel.current_grid().shape == (4, 2)
    assert "4 × 2 blocks of 64 × 128" in panel.summary.text()
