"""How the store opens a file (issue #51): ``--db`` through a symlink reads what a writer that
still has the real file open has committed (item 9), and a writer refuses a read-only file
before SQLite leaves a -wal and -shm beside it (item 5)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.wal_writer import writer_holding
from workbench.store import Store


def _immutable(path: Path, on: bool) -> None:
    """chattr +i / -i: root ignores file modes, not the immutable flag."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed: no read-only file root cannot write")
    made = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"this file system has no immutable flag: {made.stderr!r}")


def test_a_symlinked_db_lists_what_a_writer_with_the_real_file_open_committed(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    real = tmp_path / "real" / "r.db"
    real.parent.mkdir()
    Store(real).close()
    link = tmp_path / "link.db"
    link.symlink_to(real)
    with writer_holding(real):
        by_real = run_cli("--db", real, "runs", "--json")
        by_link = run_cli("--db", link, "runs", "--json")
    assert by_real.code == 0 and by_link.code == 0, by_link.err
    assert len(json.loads(by_real.out)) == 16
    assert len(json.loads(by_link.out)) == 16
    with Store(link) as store:  # a writer through the link sees them too, and keeps the link
        assert store.count_runs() == 16
    assert link.is_symlink() and not Path(f"{link}-wal").exists()


def test_sweep_into_a_read_only_file_says_so_and_leaves_nothing_beside_it(
    run_cli: Any, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    Store(db).close()
    _immutable(db, True)
    try:
        done = run_cli("--db", db, "sweep", "--seq-lens", "16", "--heads", "1")
    finally:
        _immutable(db, False)
    assert done.code == 2  # refused at opening, as any --db that cannot take runs
    assert done.err.strip() == (
        f"error: cannot write to {db}: the file is read-only; nothing was changed"
    ), done.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.db"]
