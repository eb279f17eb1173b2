"""A ragged batch's run survives an import whole: its per-point lengths, KV cache and page size,
its block maps and its CSV row are the same in the database it was imported into."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.store import Store


def test_a_paged_ragged_run_imports_with_its_lengths_pages_and_csv_row(
    tmp_path: Path, run_cli: Callable[..., Any]
) -> None:
    here, there = tmp_path / "here.db", tmp_path / "there.db"
    ran = run_cli(
        "sweep", "--db", here, "--backend", "reference", "--heads", "4", "--kv-heads", "2",
        "--head-dim", "32", "--q-len", "1", "--k-lens", "64,128", "--lengths", "40,0,17,100",
        "--kv-cache", "paged", "--page-size", "16", "--label", "ragged",
    )  # fmt: skip
    assert ran.code == 0, ran.err
    assert run_cli("import", "--db", there, here).code == 0
    with Store(here) as a, Store(there) as b:
        (run_a,), (run_b,) = a.runs(), b.runs()
        assert run_b.problem == run_a.problem and run_b.problem.kv_cache == "paged"
        points_a, points_b = a.points(run_a.id), b.points(run_b.id)
        assert [(p.lengths, p.page_size, p.kv_cache) for p in points_b] == [
            (p.lengths, p.page_size, p.kv_cache) for p in points_a
        ]
        # Each point's batch scaled so its longest sequence is the point's k_len.
        assert [max(p.lengths or ()) for p in points_b] == [64, 128]
        for pa in points_a:
            map_a, map_b = a.block_map(run_a.id, pa.seq_len), b.block_map(run_b.id, pa.seq_len)
            assert map_a is not None and map_b is not None and (map_a == map_b).all()
    rows = []
    for db in (here, there):
        out = tmp_path / f"{db.stem}.csv"
        assert run_cli("export", "--db", db, "--csv", out).code == 0
        with out.open(newline="") as f:
            rows.append(list(csv.DictReader(f)))
    drop = {"run_id", "point_id", "group_id", "imported_from"}
    strip = [[{k: v for k, v in r.items() if k not in drop} for r in table] for table in rows]
    assert strip[0] == strip[1] and len(strip[0]) == 2
