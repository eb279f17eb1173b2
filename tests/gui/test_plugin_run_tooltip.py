"""History's tooltip on a cuTile plugin's run lists what each length compiled to, as it does for
our kernel's runs (a plugin that declares compile_cubin stores it with each point)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from tests.gui.gui_helpers import seed_run
from workbench.store import Store

pytestmark = pytest.mark.gui

COMPILED = {"arch": "sm_90", "registers": 255, "spill_bytes": 0, "shared_bytes": 107520,
            "threads": 128, "ctas_per_sm": 1, "error": ""}  # fmt: skip


def test_a_plugin_runs_tooltip_says_what_each_length_compiled_to(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    with Store(db_path) as store:
        machine = {"hostname": "h", "gpu_name": "NVIDIA H100", "plugin_knobs": {"tile": 64}}
        plugin = seed_run(store, label="naive", backend="cutile-naive", machine=machine)
        peer = seed_run(store, label="peer", backend="torch-cudnn", machine={"hostname": "h"})
        for run_id in (plugin, peer):
            for point in store.points(run_id):
                extra = {**(point.extra or {}), "resources": COMPILED}
                store.db.execute(
                    "UPDATE points SET extra = ? WHERE run_id = ? AND seq_len = ?",
                    [json.dumps(extra), run_id, point.seq_len],
                )
        store.db.conn.commit()
    window = make_window(probe_backends=False)
    model = window.history.model

    def tip(run_id: int) -> str:
        return str(model.data(model.index(model.row_of(run_id), 5), Qt.ItemDataRole.ToolTipRole))

    assert "Compiled per sequence length:" in tip(plugin) and "255" in tip(plugin)
    # A peer compiles nothing of ours: its tooltip does not look points up.
    assert "Compiled per sequence length:" not in tip(peer)
