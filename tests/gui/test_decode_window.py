"""Decode in the window (issue 34): a decode preset and the k_len axis in the form, GB/s in the
plots and Compare, the splits in the Block map tab, the peers' decode notes in the backend
picker and the decode ladder in the Ladder tab, all driven as a user would."""

from __future__ import annotations

import html
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gui_helpers import click_run, pick, run_and_wait, type_into
from readouts import cell_text, drawn_rgb, plotted, row_tooltip, run_curve

from kernels.schedule import BlockKind, split_ranges
from workbench.analysis.bandwidth import point_bandwidth
from workbench.analysis.compare import run_name
from workbench.analysis.streaming import fit_run
from workbench.analysis.streaming import summary as streaming_summary
from workbench.gui.heatmap import KIND_COLORS
from workbench.gui.split_legend import split_rgb
from workbench.store import Store

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.gui


def decode_form(
    qtbot: Any, window: Any, *, k_lens: str = "128,256", q_len: int = 1, mask: str = "none"
) -> None:
    """The Llama-3-8B decode preset, shrunk to what the CPU reference measures in a moment."""
    c = window.controls
    pick(c.decode.preset, "llama3-8b-decode")
    type_into(qtbot, c.heads, "8")
    type_into(qtbot, c.kv_heads, "2")
    pick(c.head_dim, 32)
    pick(c.dtype, "float16")
    type_into(qtbot, c.decode.q_len, str(q_len))
    type_into(qtbot, c.seq_lens, k_lens)
    pick(c.mask, mask)


def test_a_decode_preset_fills_the_form_and_the_run_sweeps_k_len(qtbot: Any, window: Any) -> None:
    c = window.controls
    pick(c.decode.preset, "llama3-70b-speculative")
    assert (c.heads.value(), c.kv_heads.value(), c.head_dim.currentData()) == (64, 8, 128)
    assert c.dtype.currentData() == "bfloat16" and c.mask.currentData() == "causal"
    assert c.decode.axis_value() == "k_len" and c.decode.q_len.value() == 16
    assert c.seq_lens.text() == "4k-128k" and c.decode.q_len.isEnabled()
    # ...and the kernel that reads a KV cache: packed heads, an auto split, 128-key blocks at
    # D 128 (the form's own 64×64 tile form read 0.12x cuDNN at B=1 32k on the H200).
    assert c.pack_gqa.isChecked() and c.kv_splits.currentData() is None
    assert c.tile_n.currentData() == 128

    decode_form(qtbot, window, q_len=2, mask="causal")
    run_id = run_and_wait(qtbot, window)
    store: Store = window.store
    run = store.run(run_id)
    assert run.status == "complete" and run.axis == "k_len" and run.config.mask == "causal"
    assert run.config.pack_gqa and run.config.kv_splits is None
    assert [(p.q_len, p.k_len) for p in store.points(run_id)] == [(2, 128), (2, 256)]
    # History says what was swept: key lengths, at q_len 2.
    model = window.history.model
    assert model.index(0, 6).data() == "k_len 128, 256"
    assert "q_len 2" in model.index(0, 5).data()
    # The plots' x axis is the key length, and the readout names it.
    assert window.plots.latency_plot.getAxis("bottom").labelText == "key length k_len"
    window.plots.show_readout_at(8.0)
    assert "k_len&nbsp;=&nbsp;256" in window.plots.readout.text()
    # Along N again: q_len follows each length, and its field says so by being greyed out.
    pick(c.decode.axis, "seq_len")
    assert not c.decode.q_len.isEnabled()


def test_loading_a_decode_run_puts_its_axis_and_q_len_back(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from PySide6.QtWidgets import QMenu

    decode_form(qtbot, window, k_lens="128", q_len=3, mask="causal")
    run_id = run_and_wait(qtbot, window)
    c = window.controls
    pick(c.decode.axis, "seq_len")
    type_into(qtbot, c.decode.q_len, "1")

    def choose_load(menu: QMenu, global_pos: Any) -> Any:
        action = next(a for a in menu.actions() if a.text() == "Load into form")
        action.trigger()
        return action

    monkeypatch.setattr(window.history, "exec_menu", choose_load)
    table = window.history.table
    table.customContextMenuRequested.emit(table.visualRect(table.model().index(0, 0)).center())
    assert c.decode.axis_value() == "k_len" and c.decode.q_len.value() == 3
    assert c.mask.currentData() == "causal" and not c.input_pos.isEnabled()
    spec = c.spec()
    assert spec.axis == "k_len" and spec.seq_lens == (128,) and spec.problem.q_len == 3
    assert window.store.run(run_id).axis == "k_len"


def test_q_len_longer_than_a_key_length_is_marked_on_the_lengths(qtbot: Any, window: Any) -> None:
    decode_form(qtbot, window, k_lens="64,128", q_len=100)
    click_run(qtbot, window)
    assert not window.jobs.is_running()
    assert window.controls.invalid_fields() == ["seq_lens"]
    assert "at least the 100 query rows" in window.controls.error_label.text()
    assert window.store.runs() == []


def test_the_throughput_plot_shows_gb_per_s_of_k_and_v(qtbot: Any, window: Any) -> None:
    decode_form(qtbot, window)
    run_id = run_and_wait(qtbot, window)
    run = window.store.run(run_id)
    points = window.store.points(run_id)
    plots = window.plots
    _, tflops = run_curve(plots.tflops_plot, run_id)
    np.testing.assert_allclose(tflops, [p.tflops for p in points])
    pick(plots.throughput, "kv_gbs")
    assert plots.tflops_plot.getAxis("left").labelText == "GB/s of K+V"
    _, gbs = run_curve(plots.tflops_plot, run_id)
    np.testing.assert_allclose(gbs, [point_bandwidth(run, p)["kv_gbs"] for p in points])
    plots.show_readout_at(7.0)
    assert "GB/s" in plots.readout.text()


def test_the_block_map_colours_each_split(qtbot: Any, window: Any) -> None:
    decode_form(qtbot, window, k_lens="256")
    c = window.controls
    pick(c.tile_n, 32)
    c.pack_gqa.click()
    pick(c.kv_splits, 4)
    run_id = run_and_wait(qtbot, window)
    [point] = window.store.points(run_id)
    assert point.extra["kv_splits"] == 4
    heat = window.heatmap
    window.tabs.setCurrentWidget(heat)  # the Block map tab
    # Four query heads of a KV head are the 4 rows of one 16-row tile: one q-block of 8 key
    # blocks, read by 4 splits of 2 blocks each.
    assert heat.current_grid().shape == (1, 8)
    assert heat.show_splits.isVisible() and heat.show_splits.isChecked()
    ranges = split_ranges(8, 4)
    assert heat.split_legend.texts == [
        f"split {s}: key blocks {lo}–{hi - 1}" for s, (lo, hi) in enumerate(ranges)
    ]
    heat.image.render()  # the lookup table applied, as a paint would
    for s, (lo, _) in enumerate(ranges):
        assert drawn_rgb(heat.image, 0, lo) == split_rgb(s)
    assert "splits" in heat.block_text(0, 3) and "split 1" in heat.block_text(0, 3)
    heat.show_splits.click()  # back to computed / masked / skipped
    heat.image.render()
    assert drawn_rgb(heat.image, 0, 0) == KIND_COLORS[BlockKind.COMPUTED]
    assert not heat.split_legend.isVisible()


def test_compare_of_decode_runs_gives_gb_per_s(qtbot: Any, window: Any) -> None:
    decode_form(qtbot, window)
    first = run_and_wait(qtbot, window)
    window.controls.pack_gqa.click()
    second = run_and_wait(qtbot, window)
    window.history.select_runs([first, second])
    window.tabs.setCurrentWidget(window.compare)
    panel = window.compare
    qtbot.waitUntil(lambda: panel.table.rowCount() == 2)
    header = panel.table.horizontalHeaderItem(0).text()
    assert header == "k_len"
    run = window.store.run(first)
    point = window.store.points(first)[0]
    expected = f"{point_bandwidth(run, point)['kv_gbs']:.4g} GB/s"
    assert expected in cell_text(panel.table, 0, 1)
    chart_axis = panel.chart.plot.getAxis("bottom")
    assert chart_axis.labelText == "key length k_len"
    # Lengths this short stay in L2: no fixed cost and rate to fit, and the panel says why.
    assert panel.streaming.isVisible()
    assert "no fit: 0 lengths with K+V past 128 MB" in panel.streaming.text()


def test_compare_of_the_committed_h200_decode_group_says_where_the_time_goes(
    qtbot: Any, make_window: Any, tmp_path: Path
) -> None:
    copy = tmp_path / "h200-decode.db"
    shutil.copy(ROOT / "bench" / "results" / "h200-decode.db", copy)  # opening may migrate
    window = make_window(copy, probe_backends=False)
    runs = window.store.group_runs(9)  # B=1 GQA 32/8 D 128: cutile, cuDNN, FA2, FA4
    window.history.select_runs([r.id for r in runs])
    window.tabs.setCurrentWidget(window.compare)
    panel = window.compare
    qtbot.waitUntil(lambda: panel.table.rowCount() == 6)
    # The peers' columns in the order the group ran them, not History's newest first.
    headers = [panel.table.horizontalHeaderItem(c).text() for c in range(panel.table.columnCount())]
    peers = [h.split()[0] for h in headers if " ms" in h and "(baseline)" not in h]
    assert peers == [f"#{r.id}" for r in runs[1:]] and runs[0].backend == "cutile"
    assert [r.id for r in runs] == sorted(r.id for r in runs)
    assert panel.streaming.isVisible()
    assert "past 128 MB of K+V" in panel.streaming.toolTip()
    text = panel.streaming.text()
    for run in runs:
        said = streaming_summary(fit_run(run, window.store.points(run.id)))
        assert f"{html.escape(run_name(run))}</b> {html.escape(said)}" in text
    # Another selection of prefill runs: nothing about streaming.
    window.history.select_runs([])
    qtbot.waitUntil(lambda: not panel.streaming.isVisible())


def test_the_backend_picker_says_fa4_has_no_split_on_sm_90(window: Any) -> None:
    assert "no split of the key range on sm_90" in row_tooltip(window.controls.backends, "fa4")
    assert "lower-right" in row_tooltip(window.controls.backends, "torch-cudnn")


def test_the_ladder_tab_runs_the_decode_ladder(qtbot: Any, window: Any) -> None:
    ladder = window.ladder
    pick(ladder.preset, "decode")
    # The form sweeps N: the decode ladder needs k_len, and says so before anything runs.
    qtbot.mouseClick(ladder.run_button, qtbot_left())
    assert not window.jobs.is_running() and window.store.runs() == []
    assert window.controls.invalid_fields() == ["axis"]
    decode_form(qtbot, window, k_lens="128")
    qtbot.mouseClick(ladder.run_button, qtbot_left())
    assert window.jobs.is_running()
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=60_000)
    runs = window.store.runs()
    assert len(runs) == 4 and {r.axis for r in runs} == {"k_len"}
    assert [r.step for r in reversed(runs)] == [
        "baseline (one CTA per head)",
        "+ GQA packing",
        "+ KV split (auto)",
        "autotuned",
    ]
    # The tab reads it as a decode ladder: key lengths, GB/s of K+V in every cell.
    table = ladder.table
    assert table.horizontalHeaderItem(3).text() == "k_len = 128"
    assert all("GB/s" in table.item(r, 3).text() for r in range(4))


def qtbot_left() -> Any:
    from PySide6.QtCore import Qt

    return Qt.MouseButton.LeftButton


def test_a_map_of_many_splits_and_a_long_title_still_fit_a_laptop_screen(
    qtbot: Any, window: Any
) -> None:
    """On the H200 a B=1 32k decode point ran 15 splits: its legend and its long config title
    once made the window 2800 px wide."""
    heat = window.heatmap
    window.tabs.setCurrentWidget(heat)
    ranges = split_ranges(256, 15)
    heat.split_legend.set_splits(ranges)
    heat.split_legend.show()
    heat.title.setText("#1 decode 8b-B1 · cutile · " + "64×128 none fast-math k-split " * 6)
    assert window.minimumSizeHint().width() <= 1366
    assert len(heat.split_legend.texts) == 15
    assert "split 14: key blocks" in heat.split_legend.toolTip()


def test_a_decode_form_on_the_tile_forms_knobs_says_how_to_run_the_decode_kernel(
    qtbot: Any, window: Any
) -> None:
    c, hint = window.controls, window.explain.decode_hint
    pick(c.decode.axis, "k_len")  # the lengths are key lengths; the knobs still the defaults
    qtbot.waitUntil(hint.isVisible)
    assert "tick Pack GQA heads, set KV splits to auto" in hint.text()
    c.pack_gqa.click()  # the decode form: nothing to say
    qtbot.waitUntil(lambda: not hint.isVisible())
    c.pack_gqa.click()
    qtbot.waitUntil(hint.isVisible)
    pick(c.decode.preset, "llama3-8b-decode")  # a preset brings the decode kernel's knobs
    qtbot.waitUntil(lambda: not hint.isVisible())
    c.pack_gqa.click()
    pick(c.kv_splits, 1)
    qtbot.waitUntil(hint.isVisible)
    pick(c.decode.axis, "seq_len")  # prefill: the tile form is the one to run
    qtbot.waitUntil(lambda: not hint.isVisible())


def test_tile_n_follows_the_head_dim_while_it_is_the_presets_choice(
    qtbot: Any, window: Any
) -> None:
    """The 8B decode preset at D 128 takes 128-key blocks; at D 64 it would take 256 (0.97x
    cuDNN against 0.85x with 128 on the H200), as the CLI's --preset --head-dim 64 does."""
    c = window.controls
    pick(c.decode.preset, "llama3-8b-decode")
    assert (c.head_dim.currentData(), c.tile_n.currentData()) == (128, 128)
    pick(c.head_dim, 64)
    assert c.tile_n.currentData() == 256
    pick(c.head_dim, 128)
    assert c.tile_n.currentData() == 128
    pick(c.tile_n, 64)  # the user's own choice stays
    pick(c.head_dim, 64)
    assert c.tile_n.currentData() == 64
    # Off the decode kernel (no packing, no split), the head dim leaves the tile alone.
    pick(c.tile_n, 128)
    pick(c.head_dim, 128)
    c.pack_gqa.click()
    pick(c.kv_splits, 1)
    pick(c.head_dim, 64)
    assert c.tile_n.currentData() == 128


def test_decode_plots_draw_the_gpus_plain_read_as_their_floor(
    qtbot: Any, make_window: Any, tmp_path: Path
) -> None:
    """A decode run whose machine record carries the read line (`bandwidth`: fixed + bytes /
    rate) gets a dashed floor in both plots, a legend entry, a readout entry and a line in
    Compare; runs without it get none."""
    import sqlite3

    from workbench.gui.plots import READ_LINE_NAME

    copy = tmp_path / "h200-decode.db"
    shutil.copy(ROOT / "bench" / "results" / "h200-decode.db", copy)
    with sqlite3.connect(copy) as db:
        db.execute(
            "update runs set machine = json_set(machine, '$.read_fixed_us', 2.4, "
            "'$.read_line_rate_gbs', 4565.0) where group_id = 9"
        )
    window = make_window(copy, probe_backends=False)
    plots = window.plots
    latency, throughput = plots.read_lines
    runs = window.store.group_runs(9)
    window.history.select_runs([r.id for r in runs])
    qtbot.waitUntil(lambda: latency.isVisible())
    first = runs[0]
    points = sorted(window.store.points(first.id), key=lambda p: p.seq_len)
    expected_ms = [(2.4 + first.point_problem(p).kv_bytes() / 4565.0e3) / 1e3 for p in points]
    x, ms = plotted(latency)
    np.testing.assert_allclose(x, [np.log2(p.seq_len) for p in points])
    np.testing.assert_allclose(ms, expected_ms)
    # Every backend of the group sits above the floor (slower than a plain read).
    for run in runs:
        for p in window.store.points(run.id):
            assert p.latency_ms > dict(zip(x, ms, strict=True))[np.log2(p.seq_len)]
    assert READ_LINE_NAME in [label.text for _, label in plots.legend.items]
    assert not throughput.isVisible()  # TFLOP/s: no read line on the right
    pick(plots.throughput, "kv_gbs")
    assert throughput.isVisible()
    _, gbs = plotted(throughput)
    kv = [first.point_problem(p).kv_bytes() for p in points]
    np.testing.assert_allclose(gbs, [b / (t * 1e-3) / 1e9 for b, t in zip(kv, expected_ms)])
    plots.show_readout_at(np.log2(points[-1].seq_len))
    assert f"{READ_LINE_NAME}:".replace(" ", "&nbsp;") in plots.readout.text()
    window.tabs.setCurrentWidget(window.compare)
    qtbot.waitUntil(lambda: window.compare.streaming.isVisible())
    assert (
        "a plain read on this GPU</i> 2.4 µs + 4565 GB/s a call" in window.compare.streaming.text()
    )
    # Group 10 was measured without the line: no floor, no legend entry.
    window.history.select_runs([r.id for r in window.store.group_runs(10)])
    qtbot.waitUntil(lambda: not latency.isVisible())
    assert not throughput.isVisible()
    assert READ_LINE_NAME not in [label.text for _, label in plots.legend.items]
