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


def test_a_paged_batchs_block_map_reads_per_sequence_with_its_pages_and_splits(
    qtbot: Any, make_window: Any, db_path: Any, rng: Any
) -> None:
    from workbench.cli import main

    lengths = [int(n) for n in rng.permutation([300, 1000, 70, 2000, 0])]
    print(f"lengths {lengths}")
    argv = ["sweep", "--db", str(db_path), "--lengths", ",".join(map(str, lengths)),
            "--q-len", "1", "--page-size", "64", "--tile-n", "64", "--kv-splits", "2",
            "--heads", "8", "--kv-heads", "2", "--pack-gqa", "--mask", "none", "--warmup", "0",
            "--samples", "1", "--min-time", "0"]  # fmt: skip
    assert main(argv) == 0
    window = make_window(probe_backends=False)
    [run] = window.store.runs()
    [point] = window.store.points(run.id)
    reads = point.extra["sequences"]
    window.history.select_runs([run.id])
    window.tabs.setCurrentWidget(window.heatmap)
    heat = window.heatmap
    qtbot.waitUntil(lambda: heat.current_grid() is not None, timeout=5_000)
    assert heat.plot.getAxis("left").labelText == "sequence (its q-blocks)"
    rows = heat.plot.getAxis("left")._tickLevels[0]  # "#i" at each sequence's first row
    assert [label for _, label in rows] == [f"#{i}" for i in range(len(lengths))]
    # Counts of the sequences' own key blocks: the grey right of a short one is not work.
    own = sum(-(-n // 64) for n in lengths)
    counted = [int(heat.count_labels[k].text().split(": ")[1]) for k in ("computed", "masked")]
    assert sum(counted) == own and heat.count_labels["skipped"].text() == "skipped: 0"
    wasted = sum(r["wasted_tokens"] for r in reads)
    assert wasted == sum(-(-n // 64) * 64 - n for n in lengths)
    text = " ".join(heat.summary.text().split())
    assert f"a ragged batch of {len(lengths)} sequences, 0–2,000 keys, pages of 64" in text
    assert f"{own * 64:,} positions a KV head, {wasted:,} of them the last pages'" in text
    # Coloured by each sequence's own splits; the kind swatches step aside.
    longest = lengths.index(2000)
    start, (lo, hi) = sum(max(1, r["rows"]) for r in reads[:longest]), reads[longest]["splits"][1]
    assert heat.show_splits.isVisible() and not any(s.isVisible() for s in heat.kind_swatches)
    codes = heat.image.image
    assert (codes[start, lo:hi] == 2).all() and (
        codes[start, : reads[longest]["splits"][0][1]] == 1
    ).all()
    assert "read by split 1 of its 2 splits" in heat.block_text(start, hi - 1)
    short = lengths.index(70)
    tip = heat.block_text(sum(r["rows"] for r in reads[:short]), 10)
    assert tip.startswith("sequence #")
    assert "1 query, 70 keys, 2 pages (last page's wasted tail 58)" in tip
    assert tip.endswith("past its keys (padding)")
    heat.show_splits.setChecked(False)
    assert all(s.isVisible() for s in heat.kind_swatches)


def _per_sequence(qtbot: Any, window: Any, run_id: int) -> Any:
    window.history.select_runs([run_id])
    window.tabs.setCurrentWidget(window.heatmap)
    heat = window.heatmap
    qtbot.waitUntil(lambda: heat.current_grid() is not None, timeout=5_000)
    return heat


def test_a_ragged_point_stored_without_its_sequences_still_reads_per_sequence(
    qtbot: Any, make_window: Any, db_path: Any, rng: Any
) -> None:
    """The GPU backends' ragged points stored no per-sequence reads (only the reference's did),
    so the window drew their maps as one dense batch: "Skipped 27,851 of 30,848 blocks" where
    the grey was the short sequences' padding. It reads them from the run's problem now."""
    import json
    import sqlite3

    from workbench.cli import main

    lengths = [int(n) for n in rng.integers(1, 700, size=4)]
    print(f"lengths {lengths}")
    argv = ["sweep", "--db", str(db_path), "--lengths", ",".join(map(str, lengths)),
            "--q-len", "1", "--page-size", "16", "--heads", "4", "--kv-heads", "2",
            "--pack-gqa", "--mask", "none", "--warmup", "0", "--samples", "1",
            "--min-time", "0"]  # fmt: skip
    assert main(argv) == 0
    with sqlite3.connect(db_path) as db:  # as a GPU backend's point was stored
        [(point_id, extra)] = db.execute("SELECT id, extra FROM points").fetchall()
        kept = json.loads(extra)
        del kept["sequences"]
        db.execute("UPDATE points SET extra = ? WHERE id = ?", [json.dumps(kept), point_id])
    window = make_window(probe_backends=False)
    [run] = window.store.runs()
    heat = _per_sequence(qtbot, window, run.id)
    assert heat.plot.getAxis("left").labelText == "sequence (its q-blocks)"
    assert heat.count_labels["skipped"].text() == "skipped: 0"
    text = " ".join(heat.summary.text().split())
    assert f"a ragged batch of {len(lengths)} sequences" in text


def test_the_h100s_paged_decode_reads_per_sequence(
    qtbot: Any, make_window: Any, tmp_path: Any
) -> None:
    """This session's serving-decode-64 at pages of 64, measured on an H100
    (bench/results/h100-serving.db, run 7): 64 sequences of 1,024-30,825 keys."""
    import shutil
    from pathlib import Path

    db = tmp_path / "h100-serving.db"
    shutil.copy(Path(__file__).resolve().parents[2] / "bench/results/h100-serving.db", db)
    window = make_window(db, probe_backends=False)
    heat = _per_sequence(qtbot, window, 7)
    assert heat.count_labels["skipped"].text() == "skipped: 0"
    text = " ".join(heat.summary.text().split())
    assert "a ragged batch of 64 sequences, 1,024–30,825 keys, pages of 64" in text
    assert "positions a KV head" in text and "Skipped" not in text
    # Not what the kernel recorded: the host's model of each sequence's tiles, and it says so.
    assert text.endswith("Block map: the tile schedule's model.")


def test_compare_of_the_h100s_one_length_serving_group_says_nothing_about_a_fit(
    qtbot: Any, make_window: Any, tmp_path: Any
) -> None:
    """Compare of serving-decode-64 (group 3, one length) printed "no fit: 1 length with K+V
    past 128 MB (twice the L2); a fit needs 3" under each of its three runs."""
    import shutil
    from pathlib import Path

    db = tmp_path / "h100-serving.db"
    shutil.copy(Path(__file__).resolve().parents[2] / "bench/results/h100-serving.db", db)
    window = make_window(db, probe_backends=False)
    window.open_group_compare(3)
    panel = window.compare
    qtbot.waitUntil(lambda: panel.table.rowCount() == 1, timeout=5_000)
    assert window.tabs.currentWidget() is panel and not panel.streaming.isVisible()
    # The chart's axis is about its one length, not stretched to N = 1 by an empty noise band.
    import math

    view = panel.chart.plot.getViewBox()
    qtbot.waitUntil(lambda: view.viewRange()[0][1] > 5, timeout=5_000)  # ranged to the data
    (lo, hi), _ = view.viewRange()
    assert 10 < lo < math.log2(30825) < hi < 20, (lo, hi)


def test_the_batch_shape_puts_the_serving_kernels_own_knobs_in_the_form(
    qtbot: Any, window: Any
) -> None:
    """The obvious path in the window is the fast one, as at the CLI: a paged decode at pages
    of 64 reads 128-key blocks with the ragged split table, at pages of 16 64-key blocks (128
    would spill), a varlen prefill runs 128x128 tiles; a value the user chose stays, and the
    uniform batch gets the registry's values back."""
    c = window.controls
    pick(c.head_dim, 128)
    assert (c.spec().config.tile_m, c.spec().config.tile_n) == (64, 64)
    pick(c.decode.axis, "k_len")
    type_into(qtbot, c.decode.q_len, "1")
    type_into(qtbot, c.serving.lengths, "300,30000")
    pick(c.serving.kv_cache, "paged")
    pick(c.serving.page_size, 64)
    config = c.spec().config
    assert (config.tile_n, config.kv_splits) == (128, None)
    pick(c.serving.page_size, 16)
    assert c.spec().config.tile_n == 64
    pick(c.serving.page_size, 64)
    assert c.spec().config.tile_n == 128
    c.apply_state({"tile_n": 64})  # the user's own choice
    pick(c.serving.page_size, 256)
    assert c.spec().config.tile_n == 64
    pick(c.decode.axis, "seq_len")  # the same lengths as a varlen prefill
    type_into(qtbot, c.seq_lens, "30000")
    config = c.spec().config
    assert c.spec().problem.varlen and (config.tile_m, config.tile_n) == (128, 64)
    assert config.kv_splits == 1  # the paged shape's auto went back to the registry's
    type_into(qtbot, c.serving.lengths, "")
    assert (c.spec().config.tile_m, c.spec().config.tile_n) == (64, 64)
