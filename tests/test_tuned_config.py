"""An autotuned cuTile run shows what its tuner launched, never the form's nominal tiles: the
runs list and `show` leave the tuned knobs out of its config, and the CSV leaves their config
cells empty and gives each point's launch in `tuned_*` columns."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import Store

# Two lengths, two different picks, as the cuTile backend records them in extra["launch"].
LAUNCHES = {
    32: {"tile_m": 128, "tile_n": 128, "occupancy": None, "num_worker_warps": 8,
         "poly_exp2_cols": 16, "persistent": True, "fast_math": True},
    64: {"tile_m": 64, "tile_n": 128, "occupancy": 2, "num_worker_warps": None,
         "poly_exp2_cols": 0, "persistent": False, "fast_math": True},
}  # fmt: skip


def stored_cutile_run(db: Path, measure: Callable[..., Any], *, autotune: bool) -> int:
    config = KernelConfig(tile_m=64, tile_n=64, fast_math=True, mask="causal", autotune=autotune)
    problem = Problem(heads=1, head_dim=32)
    with Store(db) as store:
        spec = SweepSpec(problem, tuple(LAUNCHES), config, backend="cutile")
        run_id = store.create_run(spec, {"hostname": "h"})
        for n, launch in LAUNCHES.items():
            point = measure(problem.with_seq_len(n), config)
            store.add_point(run_id, dataclasses.replace(point, extra={"launch": launch}))
        store.finish_run(run_id, "complete")
    return run_id


def test_an_autotuned_cutile_run_shows_its_tuned_launches_not_the_forms_tiles(
    db_path: Path, measure: Callable[..., Any], run_cli: Callable[..., Any]
) -> None:
    run_id = stored_cutile_run(db_path, measure, autotune=True)
    listed = run_cli("runs")
    row = next(line for line in listed.out.splitlines() if line.startswith(str(run_id)))
    assert "causal fast-math k-split remap autotune" in row and "64×64" not in row
    shown = run_cli("show", str(run_id))
    assert "config   causal fast-math k-split remap autotune" in shown.out
    assert "64×64" not in shown.out
    assert "128×128" in shown.out and "64×128 occ 2" in shown.out  # the per-length picks

    exported = run_cli("export", "--csv", "-")
    assert exported.code == 0
    records = list(csv.DictReader(io.StringIO(exported.out)))
    assert [r["seq_len"] for r in records] == ["32", "64"]
    for record in records:
        assert record["config_tile_m"] == record["config_tile_n"] == ""  # nominal, not run
        assert record["config_fast_math"] == "True" and record["config_autotune"] == "True"
    assert [(r["tuned_tile_m"], r["tuned_tile_n"]) for r in records] == [
        ("128", "128"),
        ("64", "128"),
    ]
    assert [r["tuned_occupancy"] for r in records] == ["", "2"]
    assert [r["tuned_persistent"] for r in records] == ["True", "False"]


def test_a_cutile_run_without_autotune_keeps_its_config_and_no_tuned_columns(
    db_path: Path, measure: Callable[..., Any], run_cli: Callable[..., Any]
) -> None:
    run_id = stored_cutile_run(db_path, measure, autotune=False)
    row = next(line for line in run_cli("runs").out.splitlines() if line.startswith(str(run_id)))
    assert "64×64 causal fast-math k-split remap" in row
    records = list(csv.DictReader(io.StringIO(run_cli("export", "--csv", "-").out)))
    assert {r["config_tile_m"] for r in records} == {"64"}
    assert "tuned_tile_m" in records[0]  # the columns are there, empty
    assert all(v == "" for r in records for k, v in r.items() if k.startswith("tuned_"))
