"""A database this process holds open keeps seeing what other processes write to it, however
many more stores this process opens and closes on it (the window's History stopped at the run
before when a second store in the window's process read the file's header with a plain open:
closing that descriptor dropped the process's SQLite locks, so a child's last connection
deleted the -wal and -shm the window's connection still read)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import Store

CHILD = """
import sys
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import Store

with Store(sys.argv[1]) as store:
    spec = SweepSpec(Problem(q_len=64, k_len=64), (64,), KernelConfig(), "reference", sys.argv[2])
    store.create_run(spec, {})
"""


def _run_in_child(db: Path, label: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), label], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_a_store_kept_open_sees_a_childs_run_after_another_store_here_opened_and_closed(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    window = Store(db)  # the window's store, open for the whole session
    try:
        spec = SweepSpec(Problem(q_len=64, k_len=64), (64,), KernelConfig(), "reference", "first")
        window.create_run(spec, {})
        for _ in range(2):  # a job's own store in this process, opened and closed
            with Store(db) as job:
                assert [r.label for r in job.runs()] == ["first"]
        _run_in_child(db, "from a child")
        assert [r.label for r in window.runs()] == ["from a child", "first"]
        with Store(db, read_only=True) as reader:  # a reading command in this process too
            assert len(reader.runs()) == 2
        _run_in_child(db, "again")
        assert len(window.runs()) == 3
    finally:
        window.close()
    window.close()  # twice is harmless
    with Store(db) as after:
        assert len(after.runs()) == 3
