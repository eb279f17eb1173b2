"""Issue #51 item 10: one rule for what a run database is, for ``import`` as for every other
command; a refused import creates no target database."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import FAST_TIMING_ARGS

Script = Callable[..., subprocess.CompletedProcess[str]]


def other_application(path: Path, version: int) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, km REAL)")
        conn.execute("CREATE TABLE points (x REAL, y REAL)")
        conn.executemany("INSERT INTO runs (km) VALUES (?)", [(1.5,), (42.0,)])
        conn.execute(f"PRAGMA user_version = {version}")
    conn.close()


@pytest.mark.parametrize("version", [0, 3])
def test_another_applications_runs_and_points_are_refused_and_no_target_is_made(
    script: Script, tmp_path: Path, version: int
) -> None:
    source = tmp_path / "tracks.sqlite"
    other_application(source, version)
    before = source.read_bytes()
    target = tmp_path / "target.db"
    done = script(target, "import", str(source), "--db", str(target))
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: cannot import {source}: not a run database"), line
    assert "another application" in line and "run_id" not in line.split("(")[0]
    assert not target.exists()
    assert source.read_bytes() == before


def test_a_look_alike_of_version_0_is_refused_as_the_store_refuses_it(
    script: Script, tmp_path: Path
) -> None:
    real = tmp_path / "real.db"
    made = script(real, "sweep", "--db", str(real), "--seq-lens", "16", "--heads", "1")
    assert made.returncode == 0, made.stderr
    look_alike = tmp_path / "look-alike.db"
    shutil.copy(real, look_alike)
    with sqlite3.connect(look_alike) as conn:
        conn.execute("UPDATE runs SET backend = 'evil'")
        conn.execute("PRAGMA user_version = 0")
    conn.close()
    opened = script(look_alike, "runs", "--db", str(look_alike))
    assert opened.returncode == 2 and "another application" in opened.stderr
    target = tmp_path / "target.db"
    done = script(target, "import", str(look_alike), "--db", str(target))
    assert done.returncode == 2, done.stdout
    [line] = done.stderr.splitlines()
    assert "not a run database" in line and "another application" in line
    assert not target.exists()
    # A real run database still imports (the rule refuses only what is not one).
    done = script(target, "import", str(real), "--db", str(target), *[])
    assert done.returncode == 0, done.stderr
    listed = script(target, "runs", "--db", str(target), "--json")
    assert '"backend": "reference"' in listed.stdout and "evil" not in listed.stdout


def test_a_newer_run_database_is_still_refused_as_newer(script: Script, tmp_path: Path) -> None:
    source = tmp_path / "newer.db"
    made = script(source, "sweep", "--db", str(source), "--seq-lens", "16", *FAST_TIMING_ARGS)
    assert made.returncode == 0, made.stderr
    with sqlite3.connect(source) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    target = tmp_path / "target.db"
    done = script(target, "import", str(source), "--db", str(target))
    assert done.returncode == 2 and "written by a newer fmha-workbench" in done.stderr
    assert not target.exists()
