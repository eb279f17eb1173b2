"""A store read across machines (issue 52, item 5): `runs` lists newest first by creation time
(an imported run keeps its own time, so its id says nothing of its age), names each run's
machine when the listing holds more than one, and `compare` says whose each run is."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
H200_DB = ROOT / "bench" / "results" / "h200.db"


def _listing(out: str) -> tuple[list[str], list[list[str]]]:
    """The header's column names and each row's cells (columns are two or more spaces apart)."""
    lines = out.splitlines()
    split = [[c for c in line.split("  ") if c.strip()] for line in lines]
    return [c.strip() for c in split[0]], [[c.strip() for c in row] for row in split[1:]]


def test_a_local_run_made_after_an_imports_runs_is_listed_above_them(
    run_cli: Any, tmp_path: Path, db_path: Path, fast_args: list[str]
) -> None:
    other = tmp_path / "lab-h200.db"
    shutil.copy(H200_DB, other)
    local = run_cli("sweep", "--db", db_path, *fast_args, "--seq-lens", "64")
    assert local.code == 0, local.err
    assert run_cli("import", "--db", db_path, other).code == 0
    listed = json.loads(run_cli("runs", "--db", db_path, "--json").out)
    times = [r["created_at"] for r in listed]
    assert times == sorted(times, reverse=True) and len(listed) == 17
    assert listed[0]["id"] == 1 and listed[0]["backend"] == "reference"
    # Within one second the later id is first (the H200 group's runs share their second).
    for newer, older in itertools.pairwise(listed):
        if newer["created_at"] == older["created_at"]:
            assert newer["id"] > older["id"]
    header, rows = _listing(run_cli("runs", "--db", db_path).out)
    assert header[:3] == ["id", "created", "machine"]
    assert rows[0][0] == "1" and rows[0][2].startswith("CPU on ")
    assert {row[2] for row in rows[1:]} == {"NVIDIA H200 on vm"}
    # --limit keeps the newest, whatever their ids.
    header, rows = _listing(run_cli("runs", "--db", db_path, "--limit", "1").out)
    assert "machine" not in header and [row[0] for row in rows] == ["1"]


def test_runs_of_one_machine_are_listed_without_a_machine_column(
    run_cli: Any, db_path: Path, fast_args: list[str]
) -> None:
    for _ in range(2):
        assert run_cli("sweep", "--db", db_path, *fast_args, "--seq-lens", "64").code == 0
    header, rows = _listing(run_cli("runs", "--db", db_path).out)
    assert "machine" not in header and [row[0] for row in rows] == ["2", "1"]


def test_compare_names_each_runs_machine_when_they_differ(
    run_cli: Any, tmp_path: Path, db_path: Path, fast_args: list[str]
) -> None:
    other = tmp_path / "lab-h200.db"
    shutil.copy(H200_DB, other)
    local = int(run_cli("sweep", "--db", db_path, *fast_args, "--seq-lens", "1024").out)
    run_cli("import", "--db", db_path, other)
    imported = next(r["id"] for r in json.loads(run_cli("runs", "--json").out)[1:])
    out = run_cli("compare", "--db", db_path, local, imported).out
    lines = out.splitlines()
    assert lines[0].startswith(f"run {local}: reference") and lines[0].endswith(")")
    assert "(CPU on " in lines[0] and lines[1].endswith("(NVIDIA H200 on vm)")
    assert "careful: the runs come from different machines" in out
    data = json.loads(run_cli("compare", "--db", db_path, local, imported, "--json").out)
    assert data["runs"][1]["machine"] == "NVIDIA H200 on vm"
    # Two runs of one machine: no machine named on their lines.
    again = int(run_cli("sweep", "--db", db_path, *fast_args, "--seq-lens", "1024").out)
    same = run_cli("compare", "--db", db_path, local, again).out.splitlines()
    assert "(CPU on " not in same[0] and "(CPU on " not in same[1]
