"""What the database survives: damaged files, locks held by others, newer schemas, kill -9."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kernels.schedule import Schedule
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import LOCK_RETRIES, SCHEMA_VERSION, Store, StoreError

FAST = ["--warmup", "0", "--samples", "1", "--min-time", "0"]


def spec(label: str = "") -> SweepSpec:
    return SweepSpec(Problem(heads=1, head_dim=32), (16, 32), KernelConfig(), label=label)


def filled_database(path: Path, measure: Callable, runs: int = 2) -> None:
    with Store(path) as store:
        for i in range(runs):
            run_id = store.create_run(spec(f"run {i}"), {})
            for problem in spec().problems():
                store.add_point(run_id, measure(problem, KernelConfig()))
            store.finish_run(run_id, "complete")
    assert not path.with_name(path.name + "-wal").exists()  # checkpointed on close


def set_aside_files(path: Path) -> list[Path]:
    return sorted(
        p
        for p in path.parent.glob(path.name + ".damaged-*")
        if not p.name.endswith(("-wal", "-shm"))
    )


# --- damaged files ----------------------------------------------------------------------------


def garbage_over_everything(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def truncated_to_half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def garbage_in_a_page(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.seek(4096)
        handle.write(os.urandom(4096))


def garbage_over_the_header(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.write(os.urandom(100))


@pytest.mark.parametrize("damage", [truncated_to_half, garbage_in_a_page])
def test_a_damaged_file_is_set_aside_and_a_fresh_one_started(
    damage: Callable[[Path], None], db_path: Path, measure: Callable
) -> None:
    filled_database(db_path, measure)
    damage(db_path)
    damaged_bytes = db_path.read_bytes()

    with Store(db_path) as store:
        assert store.notice is not None
        assert "damaged" in store.notice and str(db_path) in store.notice
        [moved] = set_aside_files(db_path)
        assert str(moved) in store.notice  # the user is told where their old file went
        assert moved.name.startswith("runs.db.damaged-20")  # timestamped
        assert moved.read_bytes() == damaged_bytes  # kept as it was, for recovery tools
        # The fresh database works.
        assert store.runs() == []
        run_id = store.create_run(spec("after"), {})
        store.finish_run(run_id, "complete")
    with Store(db_path) as store:
        assert store.notice is None
        assert [r.label for r in store.runs()] == ["after"]


def test_a_second_damage_gets_its_own_name(db_path: Path, measure: Callable) -> None:
    for _ in range(2):
        filled_database(db_path, measure, runs=1)
        garbage_in_a_page(db_path)
        Store(db_path).close()
    assert len(set_aside_files(db_path)) == 2


READ_COMMANDS = [["runs"], ["show", "1"], ["compare", "1", "2"], ["export", "--csv", "-"]]


def test_reading_commands_refuse_a_damaged_database_and_a_sweep_sets_it_aside(
    db_path: Path, measure: Callable, run_cli: Callable[..., Any]
) -> None:
    filled_database(db_path, measure)
    garbage_in_a_page(db_path)
    damaged_bytes = db_path.read_bytes()
    for command in READ_COMMANDS:
        refused = run_cli(*command)
        assert refused.code == 2, (command, refused.err)
        assert len(refused.err_lines) == 1 and "damaged" in refused.err, refused.err
        assert "nothing was changed" in refused.err and refused.out == ""
        assert db_path.read_bytes() == damaged_bytes and set_aside_files(db_path) == []
    swept = run_cli("sweep", "--seq-lens", "16", "--heads", "1", "--head-dim", "32", *FAST)
    assert swept.code == 0, swept.err
    [moved] = set_aside_files(db_path)
    assert "damaged" in swept.err and f"moved to {moved}" in swept.err
    assert moved.read_bytes() == damaged_bytes


@pytest.mark.parametrize("damage", [garbage_over_everything, garbage_over_the_header])
@pytest.mark.parametrize("command", [*READ_COMMANDS, ["sweep", "--seq-lens", "16", *FAST]])
def test_a_file_that_is_no_longer_sqlite_is_refused_untouched_by_every_command(
    damage: Callable[[Path], None],
    command: list[str],
    db_path: Path,
    measure: Callable,
    run_cli: Callable[..., Any],
) -> None:
    """Without its header nothing says the file was ever a run database: moving it aside
    could move a user's own file, so every command leaves it where and as it is."""
    filled_database(db_path, measure, runs=1)
    damage(db_path)
    before = db_path.read_bytes()
    result = run_cli(*command)
    assert result.code == 2 and len(result.err_lines) == 1, result.err
    assert str(db_path) in result.err and "nothing was changed" in result.err
    assert db_path.read_bytes() == before
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["runs.db"]


def test_a_directory_is_not_a_damaged_database(tmp_path: Path, run_cli: Callable[..., Any]) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    result = run_cli("runs", "--db", str(folder))
    assert result.code == 2
    assert len(result.err_lines) == 1 and "cannot open" in result.err
    assert (folder / "notes.txt").read_text() == "mine"  # not renamed, not touched
    assert list(tmp_path.iterdir()) == [folder]


# --- locks ------------------------------------------------------------------------------------

HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
print("released", flush=True)
"""


def hold_lock(path: Path, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_write_locked_by_another_process_is_retried_then_refused_clearly(
    db_path: Path,
) -> None:
    Store(db_path).close()
    holder = hold_lock(db_path, 60)
    try:
        with Store(db_path, busy_timeout_s=0.05) as store:  # reading is fine in WAL mode
            assert store.runs() == []
            started = time.monotonic()
            with pytest.raises(StoreError) as error:
                store.create_run(spec(), {})
            waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    message = str(error.value)
    assert "locked" in message and str(db_path) in message and "try again" in message
    backoff = sum(0.05 * 2**i for i in range(LOCK_RETRIES))  # 0.05 s doubling
    assert waited >= backoff * 0.9  # it really backed off before giving up
    with Store(db_path) as store:
        assert store.runs() == []  # and nothing half-written is left


def test_a_lock_released_during_the_backoff_lets_the_write_through(db_path: Path) -> None:
    Store(db_path).close()
    holder = hold_lock(db_path, 1.0)
    try:
        with Store(db_path, busy_timeout_s=0.05) as store:
            started = time.monotonic()
            run_id = store.create_run(spec("waited"), {})
            waited = time.monotonic() - started
            store.finish_run(run_id, "complete")
    finally:
        holder.wait(timeout=30)
    assert waited >= 0.3  # it had to wait for the holder...
    with Store(db_path) as store:  # ...and then the write went through
        assert [(r.label, r.status) for r in store.runs()] == [("waited", "complete")]


def test_a_cli_sweep_waits_out_a_short_lock(
    db_path: Path, run_cli: Callable[..., Any], count_rows: Callable
) -> None:
    Store(db_path).close()
    holder = hold_lock(db_path, 1.0)
    try:
        result = run_cli("sweep", "--seq-lens", "16,32", "--heads", "1", "--head-dim", "32", *FAST)
    finally:
        holder.wait(timeout=30)
    assert result.code == 0, result.err
    assert count_rows(db_path, "points") == 2


# --- newer schema -----------------------------------------------------------------------------


def test_a_newer_schema_opens_read_only(
    db_path: Path, measure: Callable, run_cli: Callable[..., Any]
) -> None:
    filled_database(db_path, measure)
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    before = db_path.read_bytes()

    with Store(db_path) as store:
        assert store.read_only
        assert store.notice is not None
        assert "newer" in store.notice and "read-only" in store.notice
        runs = store.runs()
        assert [r.label for r in runs] == ["run 1", "run 0"]  # still readable
        assert len(store.points(runs[0].id)) == 2
        attempts = [
            lambda: store.create_run(spec(), {}),
            lambda: store.finish_run(runs[0].id, "failed"),
            lambda: store.relabel(runs[0].id, "x"),
            lambda: store.delete_runs([runs[0].id]),
            lambda: store.create_group("backends", "g"),
            lambda: store.add_point(
                runs[0].id, measure(Problem(heads=1, q_len=64, k_len=64), KernelConfig())
            ),
        ]
        for attempt in attempts:
            with pytest.raises(StoreError, match="newer"):
                attempt()
    assert db_path.read_bytes() == before  # not one byte changed

    listed = run_cli("runs", "--json")
    assert listed.code == 0 and len(json.loads(listed.out)) == 2
    assert "read-only" in listed.err
    refused = run_cli("sweep", "--seq-lens", "16", *FAST)
    assert refused.code == 2
    assert "Traceback" not in refused.err and "newer" in refused.err.splitlines()[-1]
    assert db_path.read_bytes() == before


# --- crashes ----------------------------------------------------------------------------------


def wait_for_points(db: Path, count_rows: Callable, at_least: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = count_rows(db, "points")
        except sqlite3.OperationalError:  # the file is being created
            found = 0
        if found >= at_least:
            return found
        time.sleep(0.02)
    raise AssertionError(f"no point stored in {timeout} s")


# N=4096 at 8 heads takes the reference seconds per launch: time enough to kill it mid-sweep.
SLOW_SWEEP = ["--seq-lens", "256,512,1024,2048,4096", "--heads", "8", "--mask", "causal"]


def test_kill_9_mid_sweep_keeps_every_finished_point(
    tmp_path: Path, sweep_command: Callable, count_rows: Callable, run_cli: Callable[..., Any]
) -> None:
    db = tmp_path / "killed.db"
    child = subprocess.Popen(
        sweep_command(db, *SLOW_SWEEP, "--label", "to be killed"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_points(db, count_rows, 1)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()  # reaped: its pid is gone, as after a real crash
    assert child.returncode == -signal.SIGKILL

    with Store(db) as store:
        [run] = store.runs()
        assert run.label == "to be killed"
        assert run.status == "failed"
        assert run.error is not None and "interrupted" in run.error
        points = store.points(run.id)
        assert 1 <= len(points) < 5  # killed before the end, and nothing measured was lost
        for point in points:
            assert point.latency_ms > 0 and point.samples >= 1 and point.tflops > 0
            assert point.rel_err is not None and point.rel_err < 1e-2
            grid = store.block_map(run.id, point.seq_len)
            want = Schedule(point.q_len, point.k_len, 64, 64, "causal").block_map
            assert grid is not None
            np.testing.assert_array_equal(grid, want)
            assert point.blocks_skipped == int((want == 0).sum())
    shown = run_cli("show", str(run.id), "--db", str(db))
    assert shown.code == 0 and "failed: interrupted" in shown.out


def test_ctrl_c_mid_sweep_cancels_and_keeps_points(
    tmp_path: Path, sweep_command: Callable, count_rows: Callable
) -> None:
    db = tmp_path / "interrupted.db"
    child = subprocess.Popen(
        sweep_command(db, *SLOW_SWEEP), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for_points(db, count_rows, 1)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 130
    assert "Traceback" not in err and "interrupted" in err
    with Store(db) as store:
        [run] = store.runs()
        assert run.status == "cancelled"
        assert len(store.points(run.id)) >= 1


def test_ctrl_c_between_two_events_stores_the_run_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The signal can land in the CLI's own loop (printing a point) rather than in the job:
    the run must still end cancelled, with no traceback, while the database is open."""
    from workbench import cli
    from workbench.run.events import PointFinished
    from workbench.run.progress import ProgressPrinter

    original = ProgressPrinter.__call__

    def interrupted_at_first_point(self, event):  # type: ignore[no-untyped-def]
        original(self, event)
        if isinstance(event, PointFinished):
            raise KeyboardInterrupt

    monkeypatch.setattr(ProgressPrinter, "__call__", interrupted_at_first_point)
    db = tmp_path / "interrupted.db"
    args = ["--db", str(db), "sweep", "--seq-lens", "16,32,64", "--heads", "1",
            "--head-dim", "32", "--tile-m", "16", "--tile-n", "16", "--samples", "1",
            "--warmup", "0"]  # fmt: skip
    assert cli.main(args) == 130
    assert "Traceback" not in capsys.readouterr().err
    with Store(db) as store:
        [run] = store.runs()
        assert run.status == "cancelled"
        assert len(store.points(run.id)) == 1
