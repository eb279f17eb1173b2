"""Compare on two runs of one plugin (issue 55 item 2): runs that differ only in the plugin's
own knobs are compared as any two runs, and each column header's tooltip says what its run
ran, so the two can be told apart without labels; the CLI's `compare` lists the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gui_helpers import seed_run

from workbench.store import Store

pytestmark = pytest.mark.gui


def test_two_runs_of_a_plugin_compare_and_each_header_says_its_own_knobs(
    qtbot: Any, make_window: Any, db_path: Path, run_cli: Any
) -> None:
    with Store(db_path) as store:
        runs = [
            seed_run(
                store,
                backend="numpy-softcap",
                seq_lens=(64, 128),
                machine={"hostname": "h", "plugin_knobs": {"softcap": cap, "chunk_rows": 64}},
                samples_ms={64: (ms, ms, ms), 128: (2 * ms, 2 * ms, 2 * ms)},
            )
            for cap, ms in ((0.0, 1.0), (30.0, 1.5))
        ]
    window = make_window(probe_backends=False)
    panel = window.compare
    window.tabs.setCurrentWidget(panel)
    window.history.select_runs(runs)
    qtbot.waitUntil(lambda: panel.table.rowCount() == 2)
    tips = [panel.table.horizontalHeaderItem(c).toolTip() for c in (1, 2)]
    assert "softcap 0.0, chunk_rows 64" in tips[0], tips
    assert "softcap 30.0, chunk_rows 64" in tips[1], tips
    speedups = [panel.table.item(r, 4).text() for r in range(2)]
    assert speedups == ["0.667×", "0.667×"]

    listed = run_cli("compare", *runs, "--db", db_path)
    assert listed.code == 0, listed.err
    assert f"run {runs[1]}: numpy-softcap  none · softcap 30.0, chunk_rows 64" in listed.out
