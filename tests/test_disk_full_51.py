"""Issue #51 item 8: a sweep on a disk that fills up, on a real small file system (tmpfs),
driven through the console script as a user would."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from tests.conftest import FAST_TIMING_ARGS, _console_script, subprocess_env
from tests.small_disk import fill, small_filesystem
from workbench.store import Store

TINY = ["--heads", "1", "--head-dim", "32", *FAST_TIMING_ARGS]
SLOW_SWEEP = ["--seq-lens", "256,1024,2048,4096", "--heads", "8", "--mask", "causal"]
MANY_LENGTHS = ",".join(str(16 * i) for i in range(1, 60))


def sweep(db: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_console_script(), "sweep", "--db", str(db), *argv, *TINY],
        capture_output=True,
        text=True,
        env=subprocess_env(db),
        timeout=300,
        check=False,
    )


def test_a_sweep_that_fills_the_disk_stops_failed_with_the_reason_kept(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "small", 512) as small:
        db = small / "t.db"
        assert sweep(db, "--seq-lens", "16").returncode == 0
        filler = fill(small, leave_bytes=160 * 1024)
        done = sweep(db, "--seq-lens", MANY_LENGTHS)
        filler.unlink()  # room again: the next open must still say why the run stopped
        assert done.returncode == 1, done.stderr  # a failed run, not bad input (2)
        assert "Traceback" not in done.stderr
        [last] = [line for line in done.stderr.splitlines() if line.startswith("run 2 ")]
        assert last.startswith("run 2 failed: stopped before N="), done.stderr
        assert f"the disk holding {db} is full" in last
        with Store(db) as store:  # a writer's open: it marks runs of dead processes
            run = store.run(2)
            points = store.points(2)
        assert run.status == "failed"
        assert "is full" in (run.error or "") and "interrupted" not in (run.error or "")
        assert 0 < len(points) < len(MANY_LENGTHS.split(","))


def test_a_new_database_on_a_full_disk_is_one_line_exit_1_and_leaves_no_file(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "small", 256) as small:
        fill(small)
        db = small / "new.db"
        done = sweep(db, "--seq-lens", "16")
        left = sorted(p.name for p in small.iterdir())
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [f"error: cannot open {db}: database or disk is full"]
    assert left == ["filler"]  # no 0-byte new.db (nor -wal, -shm) left behind


def test_a_disk_filled_by_another_program_mid_sweep_is_one_line_and_exit_1(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "small", 512) as small:
        db = small / "t.db"
        child = subprocess.Popen(
            [_console_script(), "sweep", "--db", str(db), *SLOW_SWEEP, *FAST_TIMING_ARGS],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=subprocess_env(db),
        )
        got = bytearray()
        reader = threading.Thread(target=lambda: got.extend(child.stderr.read()), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while not list(small.glob("t.db-wal")) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # into the first points
        fill(small)  # another program takes the rest of the disk
        child.wait(timeout=120)
        reader.join(timeout=10)
    err = got.decode()
    assert child.returncode == 1, err
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith(f"error: writing to {db} failed: database or disk is full"), err
    assert "run 1 stopped (" in last and "will read 'interrupted'" in last, err
