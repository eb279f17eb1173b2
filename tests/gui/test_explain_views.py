"""The window explains its numbers: what the form's config compiles to (as the knobs change),
the Roofline tab and the % of roofline in Plots and Compare, Nsight Compute on a point from the
Block map (greyed out with the reason where it cannot run), and a ladder cell's compiled
resources. Driven as a user would, with qtbot."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from tests.gui.gui_helpers import pick, seed_run
from tests.gui.readouts import cell_text, length_cell
from workbench.analysis.resources import ResourceService, missing_tools
from workbench.analysis.roofline import Ceilings
from workbench.store import Store

pytestmark = pytest.mark.gui

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
H200 = {"gpu_name": "NVIDIA H200", "hostname": "gpu-host", "compute_capability": "9.0"}
CEILINGS = Ceilings(
    gpu_name="NVIDIA H200",
    matmul_tflops={"float16": 700.0, "bfloat16": 690.0},
    read_gbs=4000.0,
    measured_at="2026-12-01T10:00:00+00:00",
    machine={"hostname": "gpu-host"},
    method={"matmul": "m", "read": "r"},
)


def _badge_settles(qtbot: Any, window: Any, timeout_ms: int = 90_000) -> str:
    qtbot.waitUntil(
        lambda: not window.explain.compiled.text.text().startswith("compiling"), timeout=timeout_ms
    )
    return window.explain.compiled.text.text()


def _count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The archs of the offline compiles the badge starts from now on (each a child process)."""
    started: list[str] = []
    real = ResourceService.start_child

    def counting(self: ResourceService, problem: Any, mask: str, launch: Any, arch: str) -> Any:
        started.append(arch)
        return real(self, problem, mask, launch, arch)

    monkeypatch.setattr(ResourceService, "start_child", counting)
    return started


def test_the_form_shows_what_its_config_compiles_to_and_marks_a_spill(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    why = missing_tools()
    if why is not None:
        if IN_CI:
            pytest.fail(f"{why}: under CI=true the offline compile must run, not skip")
        pytest.skip(why)
    controls = window.controls
    pick(controls.head_dim, 128)
    pick(controls.mask, "causal")
    pick(controls.tile_m, 128)
    pick(controls.tile_n, 128)
    pick(controls.num_worker_warps, 8)
    text = _badge_settles(qtbot, window)
    # The lead's measurement at 8ce300c, compiled offline for sm_90 (the machine has no GPU).
    assert window.explain.compiled.arch.currentText() == "sm_90"
    badge = window.explain.compiled
    assert text.startswith("168 regs · no spill") and badge.text.styleSheet() == ""
    # Below it, what one key block costs the SM, read from the SASS (nvdisasm, test extra).
    second = text.splitlines()[1]
    assert second.startswith("key block: ") and "of the tensor cores' cycles" in second
    assert " instructions a warp, issue " in second
    # Away and back: the second answer comes from the cache, with no compile started (counted,
    # not timed: a preempted CPU must not fail it).
    pick(controls.tile_n, 64)
    _badge_settles(qtbot, window)
    compiles = _count_compiles(monkeypatch)
    pick(controls.tile_n, 128)
    assert _badge_settles(qtbot, window, 30_000) == text
    assert compiles == []
    # sm_120's 128x64 tile with the K split (on by default) spills 8 B: marked before it runs.
    pick(controls.tile_n, 64)
    window.explain.compiled.arch.setCurrentText("sm_120")
    text = _badge_settles(qtbot, window)
    assert "SPILLS 8 B/thread" in text and "b00020" in window.explain.compiled.text.styleSheet()
    assert "key block" not in text  # sm_120's tensor instructions and rates are not modelled
    # An autotuned config is the tuner's per length: nothing is claimed for it.
    controls.autotune.setChecked(True)
    qtbot.waitUntil(lambda: window.explain.compiled.text.text().startswith("autotuned"))


def _seed(store: Store, backend: str, label: str, machine: dict[str, Any] | None) -> int:
    return seed_run(
        store, label=label, backend=backend, machine=machine if machine else {"hostname": "h"}
    )


def _set_compiled(store: Store, run_id: int, compiled: dict[str, Any]) -> None:
    """What the sweep stores with a cuTile point (the compile itself is tested elsewhere)."""
    for point in store.points(run_id):
        extra = {**(point.extra or {}), "resources": compiled}
        store.db.execute(
            "UPDATE points SET extra = ? WHERE run_id = ? AND seq_len = ?",
            [json.dumps(extra), run_id, point.seq_len],
        )
    store.db.conn.commit()


SPILLING = {"arch": "sm_90", "registers": 255, "spill_bytes": 5632, "shared_bytes": 165000,
            "threads": 128, "ctas_per_sm": 1, "error": ""}  # fmt: skip


def test_roofline_tab_plots_and_compare_give_the_percent_of_the_measured_ceilings(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    with Store(db_path) as store:
        gpu = _seed(store, "cutile", "on the H200", H200)
        cpu = _seed(store, "reference", "on the CPU", None)
        _set_compiled(store, gpu, SPILLING)
        store.add_ceilings(CEILINGS.to_dict())
    window = make_window(probe_backends=False)
    window.history.select_runs([cpu, gpu])
    qtbot.waitUntil(lambda: window.explain.roofline.data is not None)
    window.tabs.setCurrentWidget(window.explain.roofline)
    view = window.explain.roofline
    assert "Ceilings of NVIDIA H200" in view.caption.text()
    assert "float16 matmul 700 TFLOP/s, read 4000 GB/s (ridge at 175 FLOP/byte)" in (
        view.caption.text()
    )
    assert [len(view.scatters[r].points()) for r in (gpu, cpu)] == [2, 2]
    # Both log axes read as plain numbers (1, 2, 5, 10, 20 …), not 2·10¹, 3·10¹, … run together.
    for side in ("bottom", "left"):
        axis = view.plot.getAxis(side)
        labels = axis.logTickStrings([0.0, math.log10(2), math.log10(3), 1.0, 2.0], 1.0, 1.0)
        assert labels == ["1", "2", "", "10", "100"], (side, labels)
    # Flat at the matmul rate from the ridge on (the data as given; log10 is the plot's).
    assert list(view.compute_roof.yData) == [700.0, 700.0]
    assert view.memory_roof.yData[-1] == 700.0 and view.memory_roof.xData[-1] == 175.0
    gpu_run = next(r for r in view.data["runs"] if r["run_id"] == gpu)
    tip = view.point_tip(gpu_run, gpu_run["points"][0])
    assert "on the H200" in tip and "% of roofline" in tip and "spills 5632 B" in tip
    # Plots' readout: the H200 run's % and what it compiled to; why the CPU run has none.
    html = window.plots.readout_html(64)
    assert "%&nbsp;of&nbsp;roofline" in html and "255r&nbsp;spill&nbsp;5.5KB" in html
    assert "the run ran on the CPU (reference backend)" in html
    # Compare: a % column for the run whose GPU has ceilings, its compiled column beside.
    table = window.compare.table
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert f"#{gpu} % roof" in headers and f"#{cpu} % roof" not in headers
    col = headers.index(f"#{gpu} % roof")
    assert cell_text(window.compare.table, 0, col).endswith(" %")
    compiled_col = headers.index(f"#{gpu} compiled")
    assert cell_text(window.compare.table, 0, compiled_col) == "255r spill 5.5KB"
    # History: the config's tooltip lists what each length compiled to.
    model = window.history.model
    row = model.row_of(gpu)
    tip = model.data(model.index(row, 5), Qt.ItemDataRole.ToolTipRole)
    assert "Compiled per sequence length:" in tip and "SPILLS 5632 B/thread" in tip


def test_profile_is_greyed_with_its_reason_then_profiles_a_point_into_compare(
    qtbot: Any, make_window: Any, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_ncu import _fake_ncu

    with Store(db_path) as store:
        first = _seed(store, "cutile", "a", H200)
        second = _seed(store, "cutile", "b", H200)
        cpu = _seed(store, "reference", "cpu", None)
    window = make_window(probe_backends=False)
    button = window.explain.profile_button
    window.history.select_runs([first])
    qtbot.waitUntil(lambda: window.heatmap.run is not None)
    if not _ncu_here():
        assert not button.isEnabled()
        assert button.toolTip() == (
            "Cannot profile: Nsight Compute (ncu) is not on PATH: install NVIDIA Nsight "
            "Compute to profile"
        )
    _fake_ncu(tmp_path, monkeypatch)
    window.history.select_runs([cpu])
    qtbot.waitUntil(lambda: window.heatmap.run is not None and window.heatmap.run.id == cpu)
    assert not button.isEnabled() and "ran on the CPU" in button.toolTip()
    for run_id in (first, second):
        window.history.select_runs([run_id])
        qtbot.waitUntil(lambda r=run_id: window.heatmap.run.id == r and button.isEnabled())
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(
            lambda r=run_id: f"Profiled run #{r}" in window.statusBar().currentMessage()
        )
    with Store(db_path) as store:
        n = window.heatmap.current_seq_len()
        stored = next(p for p in store.points(second) if p.seq_len == n).extra["ncu"]
    assert stored["metrics"]["sm_throughput_pct"] == 71.25
    window.history.select_runs([first, second])
    window.tabs.setCurrentWidget(window.compare)
    qtbot.waitUntil(lambda: window.compare.ncu_box.isVisible())
    table = window.compare.ncu_table
    assert table.columnCount() == 3 and f"N = {n:,}" in window.compare.ncu_title.text()
    rows = {table.item(r, 0).text(): r for r in range(table.rowCount())}
    l2 = rows["L2 hit rate"]
    assert [table.item(l2, c).text() for c in (1, 2)] == ["88.4 %", "88.4 %"]
    # Where the warps wait: each stall's instruction in a word, in full on hover.
    barrier = rows["stall: barrier"]
    assert table.item(barrier, 1).text() == "0.97 · BAR 78%"
    assert table.item(barrier, 1).toolTip().splitlines() == [
        "78% of barrier at BAR.SYNC.DEFER_BLOCKING 0x0 @0x0020",
        "22% of barrier at BAR.SYNC.DEFER_BLOCKING 0x0 @0x00a0",
    ]
    hottest = rows["hottest 2"]
    assert table.item(hottest, 2).text() == "PHASECHK loop 22%"
    assert table.item(hottest, 2).toolTip() == (
        "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8+0x10], R2 @0x0030 (key loop): 22% of the "
        "samples (long_scoreboard 100%)"
    )
    assert table.item(rows["samples in key loop"], 1).text() == "59%"
    assert table.item(l2, 1).toolTip() == ""  # a headline metric: nothing more to say


def _ncu_here() -> bool:
    import shutil

    return shutil.which("ncu") is not None


def test_a_ladder_cell_shows_its_steps_registers_and_spill(
    qtbot: Any, make_window: Any, db_path: Path
) -> None:
    with Store(db_path) as store:
        group = store.create_group("ladder", "h200", {"steps": ["base", "big"]})
        base = seed_run(store, group_id=group, step="base", backend="cutile", machine=H200)
        big = seed_run(store, group_id=group, step="big", backend="cutile", machine=H200)
        _set_compiled(store, base, {**SPILLING, "registers": 168, "spill_bytes": 0})
        _set_compiled(store, big, SPILLING)
    window = make_window(probe_backends=False)
    panel = window.ladder
    window.open_ladder(group)
    qtbot.waitUntil(lambda: panel.data is not None)
    ok, spilled = panel.table.item(0, 2), panel.table.item(1, 2)  # the Compiled column
    assert ok.text() == "168r"
    assert spilled.text() == "255r spill 5.5KB"
    assert spilled.foreground().color().name() == "#b00020"
    at_64 = length_cell(panel.table, 1, 64)
    assert at_64.foreground().color().name() == "#b00020"
    assert "compiled: sm_90: 255 regs · SPILLS 5632 B/thread" in spilled.toolTip()
    assert "compiled: sm_90: 255 regs · SPILLS 5632 B/thread" in at_64.toolTip()
    assert panel.table.rowHeight(1) == panel.table.rowHeight(0) < 2 * panel.fontMetrics().height()


def test_a_mufu_bound_config_says_so_under_the_knobs_and_the_window_still_fits_a_laptop(
    qtbot: Any, window: Any
) -> None:
    why = missing_tools()
    if why is not None:
        if IN_CI:
            pytest.fail(f"{why}: under CI=true the offline compile must run, not skip")
        pytest.skip(why)
    controls = window.controls
    pick(controls.head_dim, 64)
    pick(controls.mask, "none")
    pick(controls.tile_m, 128)
    pick(controls.tile_n, 256)
    pick(controls.num_worker_warps, 8)
    controls.k_split.setChecked(True)
    text = _badge_settles(qtbot, window)
    assert text.splitlines()[-1].endswith("(MUFU-bound)"), text
    assert window.minimumSizeHint().width() <= 1366
    assert window.minimumSizeHint().height() <= 768
    if os.environ.get("FMHA_WORKBENCH_SHOT"):
        window.resize(1366, 768)
        qtbot.wait(200)
        window.grab().save(os.environ["FMHA_WORKBENCH_SHOT"])
