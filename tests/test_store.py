"""The run database: round trips, migrations, pragmas, interrupted runs."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import sqlite_utils

from workbench.backends.base import PointResult
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import SCHEMA_VERSION, RunNotFound, Store, StoreError
from workbench.store import schema as store_module


def small_spec(label: str = "", **config: object) -> SweepSpec:
    problem = Problem(batch=1, heads=2, kv_heads=1, head_dim=32, input_pos=0)
    return SweepSpec(
        problem, (16, 40, 64), KernelConfig(tile_m=16, tile_n=32, **config), label=label
    )


def schema(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return sorted(conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"))
    finally:
        conn.close()


def user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def test_run_points_and_block_maps_round_trip(
    db_path: Path, rng: np.random.Generator, measure: Callable[..., PointResult]
) -> None:
    spec = small_spec(label="round trip ü", mask="causal")
    with Store(db_path) as store:
        assert store.notice is None and not store.read_only
        run_id = store.create_run(spec, {"hostname": "here", "gpu_name": "none"})
        results = {}
        written = {}
        for problem in spec.problems():
            result = measure(problem, spec.config, rng)
            results[problem.q_len] = result
            written[problem.q_len] = store.add_point(run_id, result)
        store.finish_run(run_id, "complete")

    with Store(db_path) as store:  # a fresh connection reads what the first one committed
        run = store.run(run_id)
        assert run.label == "round trip ü"
        assert run.status == "complete" and run.error is None and run.finished_at
        assert run.backend == "reference"
        assert run.config == spec.config
        assert run.problem == spec.problem.with_seq_len(16)
        assert run.seq_lens == (16, 40, 64)
        assert run.machine["hostname"] == "here"
        points = store.points(run_id)
        assert [p.seq_len for p in points] == [16, 40, 64]
        for point in points:
            result = results[point.seq_len]
            # The timer that took the samples is kept with the point (CPU clock here), and how
            # many turns it took (Compare's noise needs four or more).
            facts = {"timer": "cpu", "turns": len(result.timing.turn_sizes)}
            assert point.to_dict() == written[point.seq_len].to_dict() | {"extra": facts}
            assert point.latency_ms == pytest.approx(result.timing.median_ms)
            assert point.samples == result.timing.count
            assert point.tflops == pytest.approx(result.tflops)
            assert point.rel_err == pytest.approx(result.accuracy.rel_err)
            counts = result.block_counts()
            assert (point.blocks_computed, point.blocks_masked, point.blocks_skipped) == (
                counts["computed"],
                counts["masked"],
                counts["skipped"],
            )
            grid = store.block_map(run_id, point.seq_len)
            assert grid is not None and grid.dtype == np.int8
            np.testing.assert_array_equal(grid, result.block_map)
            assert store.samples(run_id, point.seq_len) == pytest.approx(
                list(result.timing.samples_ms), abs=1e-6
            )
        assert store.block_map(run_id, 999) is None
        assert store.samples(run_id, 999) == []


def test_listing_search_relabel_and_delete(db_path: Path) -> None:
    with Store(db_path) as store:
        ids = [store.create_run(small_spec(label=f"run {i}"), {}) for i in range(5)]
        causal = store.create_run(small_spec(label="other", mask="causal"), {})
        assert [r.id for r in store.runs()] == [causal, *reversed(ids)]  # newest first
        assert [r.id for r in store.runs(limit=2, offset=1)] == [ids[4], ids[3]]
        assert store.count_runs() == 6
        assert [r.id for r in store.runs(search="causal")] == [causal]
        assert store.count_runs(search="run ") == 5
        store.relabel(ids[0], "renamed")
        assert store.run(ids[0]).label == "renamed"
        assert store.delete_runs([ids[1], ids[2]]) == 2
        assert store.count_runs() == 4
        with pytest.raises(RunNotFound):
            store.run(ids[1])
        with pytest.raises(RunNotFound):
            store.relabel(12345, "x")
        with pytest.raises(RunNotFound):
            store.delete_runs([ids[0], 12345])  # nothing is deleted when one id is wrong
        assert store.count_runs() == 4
        with pytest.raises(ValueError):
            store.finish_run(ids[0], "done")


def test_delete_removes_points_and_block_maps(
    db_path: Path, rng: np.random.Generator, measure: Callable[..., PointResult]
) -> None:
    spec = small_spec()
    with Store(db_path) as store:
        keep, drop = store.create_run(spec, {}), store.create_run(spec, {})
        for run_id in (keep, drop):
            store.add_point(run_id, measure(spec.problems()[0], spec.config, rng))
        store.delete_runs([drop])
        left = store.db.execute("SELECT COUNT(*) FROM block_maps").fetchone()[0]
        assert left == 1
        assert store.block_map(keep, 16) is not None
        assert store.points(drop) == []


def test_wal_and_foreign_keys_are_on(db_path: Path) -> None:
    with Store(db_path) as store:
        conn = store.db.conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        # A point of a run that does not exist is refused by the foreign key.
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("INSERT INTO points (run_id, seq_len) VALUES (4242, 1)")
    assert user_version(db_path) == SCHEMA_VERSION
    with Store(db_path) as store:  # WAL is a property of the file, FKs of each connection
        assert store.db.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_reopening_is_idempotent(db_path: Path) -> None:
    with Store(db_path) as store:
        run_id = store.create_run(small_spec(label="kept"), {})
        store.finish_run(run_id, "complete")
    first = schema(db_path)
    for _ in range(3):
        with Store(db_path) as store:
            assert store.notice is None
            assert [r.label for r in store.runs()] == ["kept"]
            assert store.run(run_id).status == "complete"
    assert schema(db_path) == first
    assert user_version(db_path) == SCHEMA_VERSION == 7


def build_schema_1(path: Path) -> None:
    """A database as the first release wrote it: migration 1 only, user_version 1."""
    db = sqlite_utils.Database(path)
    store_module._migration_1(db)
    db.execute("PRAGMA user_version = 1")
    db["runs"].insert(
        {
            "id": 7,
            "label": "from schema 1",
            "status": "complete",
            "backend": "reference",
            "problem": json.dumps(Problem(heads=4, q_len=128, k_len=128).to_dict()),
            "config": json.dumps(KernelConfig(mask="causal").to_dict()),
            "seq_lens": json.dumps([128, 256]),
            "machine": json.dumps({"hostname": "old"}),
            "created_at": "2025-01-01T00:00:00+00:00",
            "finished_at": "2025-01-01T00:01:00+00:00",
            "error": None,
        }
    )
    for n, latency in ((128, 1.5), (256, 4.25)):
        db["points"].insert(
            {
                "run_id": 7,
                "seq_len": n,
                "q_len": n,
                "k_len": n,
                "latency_ms": latency,
                "latency_p20_ms": latency * 0.9,
                "latency_p80_ms": latency * 1.1,
                "latency_min_ms": latency * 0.8,
                "samples": 10,
                "tflops": 0.5,
                "compile_s": 0.1,
                "max_abs_err": 1e-3,
                "rel_err": 2e-4,
                "blocks_computed": 1,
                "blocks_masked": 2,
                "blocks_skipped": 1,
                "peak_mem_bytes": None,
                "created_at": "2025-01-01T00:00:30+00:00",
            }
        )
    db.conn.close()


def test_migration_from_schema_1_keeps_the_data(
    db_path: Path, rng: np.random.Generator, measure: Callable[..., PointResult]
) -> None:
    build_schema_1(db_path)
    assert user_version(db_path) == 1
    with Store(db_path) as store:
        assert store.notice is None
        run = store.run(7)
        assert run.label == "from schema 1"
        assert run.config.mask == "causal"
        assert run.problem.heads == 4
        assert run.group_id is None and run.step is None
        assert run.axis == "seq_len"  # runs stored before axes were recorded swept N
        points = store.points(7)
        assert [(p.seq_len, p.latency_ms) for p in points] == [(128, 1.5), (256, 4.25)]
        assert points[1].latency_p80_ms == pytest.approx(4.675)
        assert store.block_map(7, 128) is None  # schema 1 had no block maps
        assert store.samples(7, 128) == []
        # The migrated file takes new runs with everything schema 2 adds.
        group = store.create_group("backends", "g")
        spec = small_spec()
        new = store.create_run(spec, {}, group_id=group, step="reference")
        store.add_point(new, measure(spec.problems()[0], spec.config, rng))
        assert store.block_map(new, 16) is not None
        assert [r.id for r in store.group_runs(group)] == [new]
        # ... and the machine ceilings schema 4 adds.
        assert store.ceilings() == []
    assert user_version(db_path) == SCHEMA_VERSION
    tables = {name for name, _ in schema(db_path)}
    assert {"runs", "points", "groups", "block_maps", "machine_ceilings"} <= tables
    conn = sqlite3.connect(db_path)
    try:
        fks = {(row[3], row[2]) for row in conn.execute("PRAGMA foreign_key_list(runs)")}
        assert ("group_id", "groups") in fks  # the column migration 2 added is a real FK
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


def test_a_failed_migration_leaves_the_file_as_it_was(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each migration is one transaction: a crash half-way must not leave half a schema."""
    with Store(db_path) as store:
        store.create_run(small_spec(label="before"), {})

    def half_done(db: sqlite_utils.Database) -> None:
        db["extra_table"].create({"id": int}, pk="id")
        raise RuntimeError("power cut in the middle of the next migration")

    def complete(db: sqlite_utils.Database) -> None:
        db["extra_table"].create({"id": int}, pk="id")

    monkeypatch.setattr(store_module, "MIGRATIONS", (*store_module.MIGRATIONS, half_done))
    last = store_module.SCHEMA_VERSION
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", last + 1)
    with pytest.raises((StoreError, RuntimeError)):
        Store(db_path)
    assert user_version(db_path) == last
    assert "extra_table" not in {name for name, _ in schema(db_path)}

    monkeypatch.setattr(store_module, "MIGRATIONS", (*store_module.MIGRATIONS[:last], complete))
    with Store(db_path) as store:
        assert [r.label for r in store.runs()] == ["before"]
    assert user_version(db_path) == last + 1


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_runs_left_running_by_a_dead_process_are_marked_failed(db_path: Path) -> None:
    with Store(db_path) as store:
        orphan = store.create_run(small_spec(label="orphan"), {})
        mine = store.create_run(small_spec(label="mine"), {})
        machine = store.run(orphan).machine | {"pid": dead_pid()}
        store.db.execute("UPDATE runs SET machine = ? WHERE id = ?", [json.dumps(machine), orphan])
        store.db.conn.commit()
    with Store(db_path) as store:
        run = store.run(orphan)
        assert run.status == "failed"
        assert "interrupted" in (run.error or "")
        assert run.finished_at
        assert store.run(mine).status == "running"  # this process is alive: left alone


def test_groups_lists_newest_first_filtered_by_kind_with_run_counts(db_path: Path) -> None:
    with Store(db_path) as store:
        assert store.groups() == [] and store.groups("ladder") == []
        first = store.create_group("ladder", "first", {"steps": ["a", "b"]})
        peers = store.create_group("backends", "peers")
        second = store.create_group("ladder", "second")
        store.create_run(small_spec(), {}, group_id=first, step="a")
        store.create_run(small_spec(), {}, group_id=first, step="b")
        store.create_run(small_spec(), {})  # in no group
        assert [g["id"] for g in store.groups()] == [second, peers, first]
        ladders = store.groups("ladder")
        assert [(g["id"], g["label"], g["runs"]) for g in ladders] == [
            (second, "second", 0),
            (first, "first", 2),
        ]
        assert ladders[1]["spec"] == {"steps": ["a", "b"]} and ladders[0]["spec"] == {}
        assert ladders[1]["kind"] == "ladder" and ladders[1]["created_at"]
        assert store.groups("nothing") == []


def test_a_point_is_stored_with_its_block_map_or_not_at_all(
    db_path: Path,
    rng: np.random.Generator,
    measure: Callable[..., PointResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = small_spec(mask="causal")
    with Store(db_path) as store:
        run_id = store.create_run(spec, {})
        result = measure(spec.problems()[0], spec.config, rng)
        real_table = store.db.table

        def table_that_fails_for_block_maps(name: str, **kwargs: object) -> object:
            if name == "block_maps":
                raise sqlite3.OperationalError("disk I/O error")
            return real_table(name, **kwargs)

        monkeypatch.setattr(store.db, "table", table_that_fails_for_block_maps)
        with pytest.raises(StoreError, match="disk I/O error"):
            store.add_point(run_id, result)
        monkeypatch.undo()

        assert store.points(run_id) == []  # the point went with its map
        store.add_point(run_id, result)
    with Store(db_path) as store:
        [point] = store.points(run_id)
        assert point.blocks_masked == result.block_counts()["masked"]
        assert store.block_map(run_id, point.seq_len) is not None


def test_exported_config_columns_keep_their_order_and_new_knobs_append(db_path: Path) -> None:
    """A spreadsheet built on an older export still finds its columns where they were; the
    knobs added since (the load latencies, the pipeline, the TMA store) come after them, and a
    run stored before they existed exports the kernel's defaults it ran with."""
    import csv
    import json

    from workbench.config import KernelConfig, Problem, SweepSpec
    from workbench.store import Store, export_columns

    columns = export_columns()
    config = [c.removeprefix("config_") for c in columns if c.startswith("config_")]
    assert config == [
        "tile_m", "tile_n", "fast_math", "k_split", "remap", "mask", "window", "autotune",
        "occupancy", "num_worker_warps", "poly_exp2_cols", "num_ctas", "persistent", "k_unroll",
        "k_latency", "v_latency", "pipeline", "store_tma", "q_halves", "kv_splits", "pack_gqa",
        "bnhd_inputs", "one_shot",
    ]  # fmt: skip
    assert columns.index(f"config_{config[-1]}") + 1 == columns.index("gpu")
    spec = SweepSpec(Problem(heads=1, head_dim=32), (16,), KernelConfig(), backend="reference")
    with Store(db_path) as store:
        run_id = store.create_run(spec, {"hostname": "h"})
        old = {k: v for k, v in KernelConfig().to_dict().items() if k in config[:14]}
        store.db.execute("UPDATE runs SET config = ? WHERE id = ?", [json.dumps(old), run_id])
        store.db.conn.commit()
        store.finish_run(run_id, "complete")
        stored = store.run(run_id).config.fields_for("cutile")
        out = db_path.with_name("old.csv")
        store.export_csv(out, [run_id])
    assert {k: stored[k] for k in config[14:]} == {
        "k_latency": 2, "v_latency": 4, "pipeline": False, "store_tma": True, "q_halves": True,
        "kv_splits": 1, "pack_gqa": False, "bnhd_inputs": False, "one_shot": False,
    }  # fmt: skip
    with out.open(newline="") as handle:
        assert next(csv.reader(handle)) == columns


def test_gpu_points_stored_before_turns_were_recorded_get_their_noise_from_their_samples(
    db_path: Path, rng: np.random.Generator, measure: Callable[..., PointResult]
) -> None:
    # bench/results/h200.db as committed at e265132 is such a database: Compare must not fall
    # back to the samples' p20-p80 spread for it. Every GPU turn since the one timer is ten samples.
    import dataclasses

    from workbench.analysis.compare import median_noise
    from workbench.measure.timing import TimingStats

    spec = small_spec()
    levels = 1 + 0.02 * rng.standard_normal(32)
    samples = tuple(float(lv * (1 + 0.05 * x)) for lv in levels for x in rng.uniform(-1, 1, 10))
    with Store(db_path) as store:
        run_id = store.create_run(spec, {"hostname": "here"})
        shapes = list(spec.problems())
        for problem, timer, taken in (
            (shapes[0], "graph", samples),
            (shapes[1], "cpu", samples),  # a CPU turn's size was never fixed
            (shapes[2], "events", samples[:-3]),  # not whole turns of ten: left alone
        ):
            result = dataclasses.replace(
                measure(problem, spec.config, rng),
                timing=TimingStats(taken, timer),
                extra={"timer": timer},
            )
            store.add_point(run_id, result)
        store.finish_run(run_id, "complete")
        graph, cpu, ragged = store.points(run_id)
    expected = TimingStats(samples, "graph", None, (10,) * 32).median_noise_pct
    assert graph.extra["turns"] == 32
    assert median_noise(graph) == pytest.approx(expected, rel=1e-3)
    # About 1.25 · 2 % / √32 = 0.44 %; over 20,000 seeds it stayed within 0.19-1.02 %, while the
    # samples' p20-p80 spread would be several per cent.
    assert 0.1 < median_noise(graph) < 1.5
    assert median_noise(cpu) is None and "turns" not in cpu.extra
    assert median_noise(ragged) is None and "turns" not in ragged.extra
