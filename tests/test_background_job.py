"""BackgroundJob: a job run where it should compute, one stream whatever happens to its process."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from workbench.config import ConfigError, KernelConfig, Problem, SweepSpec
from workbench.jobs import BackgroundJob, SweepJob
from workbench.measure.timing import TimingSettings
from workbench.run.events import JobFinished, PointFinished, RunFinished, RunStarted, SweepStarted
from workbench.store import Store

QUICK = TimingSettings(warmup=0, min_samples=1, min_time_s=0.0)
# N = 8k on the reference takes the child many seconds: time enough to end it mid-point.
LONG = (64, 8192)


def job(seq_lens: tuple[int, ...] = (32, 64), backend: str = "reference") -> SweepJob:
    problem = Problem(batch=1, heads=2, head_dim=32)
    return SweepJob(SweepSpec(problem, seq_lens, KernelConfig(32, 32), backend))


def test_a_reference_job_runs_whole_in_a_child_and_streams_its_events(db_path: Path) -> None:
    background = BackgroundJob(job(), db_path, QUICK)
    assert background.in_child and background.ends_process
    events = list(background.events())
    assert background.child_pid is not None and background.child_pid != os.getpid()
    assert isinstance(events[0], SweepStarted)
    assert [type(e).__name__ for e in events[1:]] == (
        ["RunStarted"] + ["PointStarted", "PointFinished"] * 2 + ["RunFinished", "JobFinished"]
    )
    assert events[-1] == JobFinished("complete", ((events[0].run_ids[0], "complete", None),))
    with Store(db_path) as store:
        assert [p.seq_len for p in store.points(events[0].run_ids[0])] == [32, 64]


def test_a_refusal_in_the_child_is_raised_as_itself_and_nothing_is_written(db_path: Path) -> None:
    Store(db_path).close()
    with pytest.raises(ConfigError) as refused:
        list(BackgroundJob(job(backend="nope"), db_path, QUICK, in_child=True).events())
    assert refused.value.field == "backends" and "nope" in str(refused.value)
    with Store(db_path) as store:
        assert store.count_runs() == 0


def ended_after_cancel(background: BackgroundJob) -> tuple[list[object], float]:
    """Run ``background``, cancel once its first point is in; its events, seconds to end."""
    events: list[object] = []
    cancelled_at = 0.0
    for event in background.events():
        events.append(event)
        if isinstance(event, PointFinished) and not cancelled_at:
            time.sleep(0.3)  # well into the long point
            cancelled_at = time.perf_counter()
            threading.Thread(target=background.cancel).start()
    return events, time.perf_counter() - cancelled_at


def test_cancel_ends_the_child_and_stores_the_open_run_cancelled(db_path: Path) -> None:
    background = BackgroundJob(job(LONG), db_path, QUICK)
    events, took = ended_after_cancel(background)
    assert took < 8.0, took  # the child was ended, not waited for
    run_id = events[0].run_ids[0]
    assert events[-2:] == [
        RunFinished(run_id, "cancelled", "cancelled by the user; the points finished before "
                    "that are kept"),
        JobFinished("cancelled", ((run_id, "cancelled", events[-2].error),)),
    ]  # fmt: skip
    with Store(db_path) as store:
        assert store.run(run_id).status == "cancelled"
        assert [p.seq_len for p in store.points(run_id)] == [64]


def test_a_child_that_dies_leaves_the_open_run_failed_with_how(db_path: Path) -> None:
    background = BackgroundJob(job(LONG), db_path, QUICK)
    events = []
    for event in background.events():
        events.append(event)
        if isinstance(event, PointFinished):
            os.kill(background.child_pid, signal.SIGKILL)  # what the OOM killer would do
    finished = events[-2]
    assert isinstance(finished, RunFinished) and finished.status == "failed"
    assert "stopped unexpectedly (killed by signal 9)" in (finished.error or "")
    assert events[-1].status == "failed"
    with Store(db_path) as store:
        run = store.run(finished.run_id)
        assert run.status == "failed" and "killed by signal 9" in (run.error or "")
        assert len(store.points(run.id)) == 1


def test_in_this_thread_a_cancel_stops_between_points(db_path: Path) -> None:
    background = BackgroundJob(job((16, 32, 48)), db_path, QUICK, in_child=False)
    assert not background.ends_process  # nothing to end: the point computes here
    events = []
    for event in background.events():
        events.append(event)
        if isinstance(event, RunStarted):
            background.cancel()
    assert background.child_pid is None
    assert [type(e).__name__ for e in events[-2:]] == ["RunFinished", "JobFinished"]
    assert events[-2].status == events[-1].status == "cancelled"
