"""Issue #51 item 12: a run database with one corrupt page, met through the console script:
one line when a reading command refuses it; when a sweep sets it aside, how many runs went
with it, where, where SQLite's whole report is, and the import that brings them back."""

from __future__ import annotations

import re
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FAST_TIMING_ARGS, _console_script, subprocess_env

RUNS = 600


def cli(db: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_console_script(), *argv],
        capture_output=True,
        text=True,
        env=subprocess_env(db),
        timeout=120,
        check=False,
    )


def damaged_database(path: Path, rng: np.random.Generator) -> None:
    """A real run database of RUNS runs (one swept, the rest copies of it under their own
    identities), with random bytes over one page in its middle."""
    made = cli(path, "sweep", "--db", str(path), "--seq-lens", "16,32", *FAST_TIMING_ARGS)
    assert made.returncode == 0, made.stderr
    with sqlite3.connect(path) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(runs)") if r[1] != "id"]
        listed = ", ".join(columns)
        for _ in range(RUNS - 1):
            conn.execute(f"INSERT INTO runs ({listed}) SELECT {listed} FROM runs WHERE id = 1")
        conn.execute("UPDATE runs SET uuid = lower(hex(randomblob(16))) WHERE id > 1")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    try:
        leaves = [
            row[0]
            for row in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'runs' AND pagetype = 'leaf' "
                "ORDER BY pageno"
            )
        ]
    except sqlite3.OperationalError:  # SQLite built without SQLITE_ENABLE_DBSTAT_VTAB
        conn.close()
        pytest.skip("this SQLite has no dbstat table to find a page of the runs table by")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    assert len(leaves) > 4
    damage = rng.integers(0, 256, size=page_size // 2, dtype=np.uint8)
    damage[0] = 0x00  # not a b-tree page type: SQLite's check is sure to see it
    with open(path, "r+b") as handle:  # one page of runs, in the middle of the table
        handle.seek((leaves[len(leaves) // 2] - 1) * page_size)
        handle.write(damage.tobytes())


def test_a_damaged_database_is_refused_in_one_line_and_left_as_it_is(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    db = tmp_path / "runs.db"
    damaged_database(db, rng)
    before = db.read_bytes()
    for command in (["runs"], ["show", "1"], ["export", "--csv", "-"]):
        done = cli(db, *command, "--db", str(db))
        assert done.returncode == 2, (command, done.stderr)
        [line] = done.stderr.splitlines()  # was 6 lines of quick_check's report
        assert line.startswith(f"error: {db} is a damaged run database ("), line
        assert f"sqlite3 {db} 'PRAGMA quick_check'" in line
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.db"]


def test_a_sweep_sets_it_aside_says_how_many_runs_where_and_how_to_get_them_back(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    db = tmp_path / "runs.db"
    damaged_database(db, rng)
    done = cli(db, "sweep", "--db", str(db), "--seq-lens", "16", *FAST_TIMING_ARGS)
    assert done.returncode == 0, done.stderr
    [note] = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    found = re.search(
        r"it was moved to (\S+) with (?:its|the) ([\d,]+) runs(?: it can still read)? "
        r"\(SQLite's whole report: (\S+)\)",
        note,
    )
    assert found, note
    counted = int(found[2].replace(",", ""))
    assert RUNS // 2 <= counted <= RUNS  # all (by an index), or those the ids still find
    moved, report = Path(found[1]), Path(found[3])
    assert moved.parent == tmp_path and moved.name.startswith("runs.db.damaged-")
    assert report.read_text().strip()  # SQLite's findings, all of them
    back = f"fmha-workbench import {moved} --db {db}"
    assert back in note
    # The fresh database has the new run; the import the note gives brings the others back.
    imported = cli(db, "import", str(moved), "--db", str(db))
    assert imported.returncode == 0, imported.stderr
    imported_count = re.match(
        r"imported (\d+) runs? from [^;\s]+(?:; (\d+) could not be read)?", imported.stdout
    )
    assert imported_count, imported.stdout
    added, lost = int(imported_count[1]), int(imported_count[2] or 0)
    assert added + lost == counted and RUNS // 2 <= added < RUNS, imported.stdout
    listed = cli(db, "runs", "--db", str(db), "--json", "--limit", str(2 * RUNS))
    assert listed.stdout.count('"backend": "reference"') == added + 1
