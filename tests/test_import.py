"""Runs from other machines in one database (issue 39, item 9): `fmha-workbench import`."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from workbench.analysis.compare import machine_differences
from workbench.store import SCHEMA_VERSION, Store

ROOT = Path(__file__).resolve().parents[1]
H200_DB = ROOT / "bench" / "results" / "h200.db"
LADDER_DB = ROOT / "bench" / "results" / "experiments" / "h200-workbench-ladder.db"


@pytest.fixture
def h200_copy(tmp_path: Path) -> Path:
    """The committed H200 database as another machine's file (a copy: nothing here writes it)."""
    target = tmp_path / "lab-h200.db"
    shutil.copy(H200_DB, target)
    return target


def counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {
            t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("runs", "groups", "points", "block_maps")
        }
    finally:
        conn.close()


def test_importing_the_h200_database_twice_leaves_each_run_once(
    run_cli: Any, h200_copy: Path, db_path: Path, fast_args: list[str]
) -> None:
    source = counts(h200_copy)
    before = h200_copy.read_bytes()
    local = run_cli("sweep", "--db", db_path, *fast_args, "--seq-lens", "64,128")
    assert local.code == 0, local.err
    first = run_cli("import", "--db", db_path, h200_copy)
    assert first.code == 0, first.err
    assert first.out.strip() == f"imported 16 runs in 4 new groups from {h200_copy}"
    second = run_cli("import", "--db", db_path, h200_copy)
    assert second.code == 0, second.err
    assert second.out.strip() == f"imported 0 runs from {h200_copy}; 16 already here"
    after = counts(db_path)
    assert after["runs"] == source["runs"] + 1 and after["groups"] == source["groups"]
    assert after["points"] == source["points"] + 2
    assert after["block_maps"] == source["block_maps"] + 2
    assert h200_copy.read_bytes() == before  # the other file is only read
    with Store(db_path) as store:
        uuids = [r["uuid"] for r in store.db.query("SELECT uuid FROM runs")]
        assert len(set(uuids)) == len(uuids) == 17
        # Each run keeps its machine, group, points, samples and block maps.
        group = next(g for g in store.groups() if g["label"] == "window" and g["runs"] == 4)
        runs = store.group_runs(group["id"])
        assert {r.machine["gpu_name"] for r in runs} == {"NVIDIA H200"}
        assert {r.backend for r in runs} == {"cutile", "torch-flash", "torch-cudnn", "fa4"}
        points = store.points(runs[0].id)
        assert [p.seq_len for p in points] == [1024, 2048, 4096, 8192, 16384]
        assert store.block_map(runs[0].id, 4096) is not None
        assert len(store.samples(runs[0].id, 4096)) == points[2].samples
        assert store.machines() == [
            "CPU on " + store.run(1).machine["hostname"],
            "NVIDIA H200 on vm",
        ]


def test_compare_of_an_imported_h200_run_and_a_local_run_says_different_machines(
    run_cli: Any, h200_copy: Path, db_path: Path, fast_args: list[str]
) -> None:
    local = int(run_cli("sweep", "--db", db_path, *fast_args, "--seq-lens", "1024").out)
    run_cli("import", "--db", db_path, h200_copy)
    with Store(db_path) as store:
        imported = next(r.id for r in store.runs() if r.backend == "cutile")
    result = run_cli("compare", "--db", db_path, local, imported)
    assert result.code == 0, result.err
    assert "careful: the runs come from different machines" in result.out
    assert "NVIDIA H200 on vm" in result.out
    data = json.loads(run_cli("compare", "--db", db_path, local, imported, "--json").out)
    assert "NVIDIA H200 on vm" in data["machines"] and len(data["machines"]) == 2


def test_the_same_gpu_with_another_driver_is_named_apart() -> None:
    class Run:
        def __init__(self, driver: str) -> None:
            self.machine = {"gpu_name": "NVIDIA H200", "hostname": "lab", "driver_version": driver}

    assert machine_differences([Run("580.1"), Run("580.1")]) == []
    assert machine_differences([Run("580.1"), Run("590.2")]) == [
        "NVIDIA H200 on lab (driver 580.1)",
        "NVIDIA H200 on lab (driver 590.2)",
    ]


def test_an_old_database_gets_the_same_identities_in_every_copy(tmp_path: Path) -> None:
    one, two = tmp_path / "one.db", tmp_path / "two.db"
    shutil.copy(H200_DB, one)
    shutil.copy(H200_DB, two)
    identities = []
    for path in (one, two):
        with Store(path) as store:  # migrated here: the backfill is from each run's content
            identities.append([r["uuid"] for r in store.db.query("SELECT uuid FROM runs")])
    assert identities[0] == identities[1] and len(set(identities[0])) == 16
    # A migrated copy and the untouched original are the same runs to import.
    with Store(tmp_path / "both.db") as store:
        run_cli_free = __import__("workbench.store.importer", fromlist=["import_runs"])
        assert len(run_cli_free.import_runs(store, one).added) == 16
        assert run_cli_free.import_runs(store, H200_DB).added == ()


@pytest.mark.parametrize("kind", ["text", "other-sqlite", "newer", "missing"])
def test_a_file_that_is_not_a_run_database_is_refused_in_one_line_and_nothing_is_written(
    run_cli: Any, tmp_path: Path, db_path: Path, kind: str
) -> None:
    other = tmp_path / "other.db"
    if kind == "text":
        other.write_text("not a database\n")
    elif kind == "other-sqlite":
        conn = sqlite3.connect(other)
        conn.execute("CREATE TABLE notes (id INTEGER, body TEXT)")
        conn.commit()
        conn.close()
    elif kind == "newer":
        shutil.copy(H200_DB, other)
        conn = sqlite3.connect(other)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.commit()
        conn.close()
    result = run_cli("import", "--db", db_path, other)
    assert result.code == 2
    assert len(result.err.splitlines()) == 1 and result.err.startswith("error: cannot import")
    expected = {
        "text": "not a run database",
        "other-sqlite": "not a run database",
        "newer": "newer fmha-workbench",
        "missing": "no such file",
    }[kind]
    assert expected in result.err
    assert not db_path.exists()  # refused before the database was even made


def test_imported_runs_keep_their_percent_of_roofline_with_their_gpus_ceilings(
    run_cli: Any, tmp_path: Path, db_path: Path
) -> None:
    """The README's step 6: after importing the H200 prefill database, its groups' report has
    the same % of roofline columns as in the H200's own file (the ceilings came along), once."""
    source = tmp_path / "h200-prefill.db"
    shutil.copy(ROOT / "bench" / "results" / "h200-prefill.db", source)
    there = run_cli("report", "--db", source, "--group", "1", "--group", "2", "--markdown")
    assert there.code == 0 and "cutile % of roofline" in there.out, there.err
    first = run_cli("import", "--db", db_path, source)
    assert first.code == 0, first.err
    assert first.out.strip().endswith("; with the measured ceilings of NVIDIA H200"), first.out
    with Store(db_path) as store:
        groups = {g["label"]: g["id"] for g in store.groups()}
    here = run_cli(
        "report", "--db", db_path, "--markdown",
        "--group", groups["prefill mha-causal"], "--group", groups["prefill mha-none"],
    )  # fmt: skip
    assert here.code == 0, here.err
    table = [line for line in here.out.splitlines() if line.startswith("|")]
    assert table == [line for line in there.out.splitlines() if line.startswith("|")]
    again = run_cli("import", "--db", db_path, source)
    assert "ceilings" not in again.out
    with Store(db_path) as store:
        assert [c["gpu_name"] for c in store.ceilings()] == ["NVIDIA H200"]


def test_a_ceilings_record_measured_here_later_wins_over_an_imported_older_one(
    run_cli: Any, tmp_path: Path, db_path: Path
) -> None:
    source = tmp_path / "h200-prefill.db"
    shutil.copy(ROOT / "bench" / "results" / "h200-prefill.db", source)
    with Store(source) as other:
        imported = other.ceilings()[0]
    with Store(db_path) as store:
        newer = {**imported, "measured_at": "2099-01-01T00:00:00+00:00"}
        newer.pop("id", None)
        store.add_ceilings(newer)
    assert run_cli("import", "--db", db_path, source).code == 0
    with Store(db_path) as store:
        records = store.ceilings()
    assert [r["measured_at"] for r in records] == [newer["measured_at"], imported["measured_at"]]
