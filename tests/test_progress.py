"""The progress model: what the CLI prints and the window renders, from a job's own events."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest

from tests import cpu_peers
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.jobs import GroupJob, LadderJob, SweepJob
from workbench.jobs.ladder_steps import load_ladder
from workbench.measure.timing import TimingSettings
from workbench.run.events import PointFinished, RunFinished
from workbench.run.progress import ProgressModel, ProgressPrinter, TimeLeft, format_duration
from workbench.run.stories import SweepStory
from workbench.store import Store

QUICK = TimingSettings(warmup=0, min_samples=1, min_time_s=0.0)


class Clock:
    """A clock the test moves: each point of a job takes ``step`` seconds."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def spec(seq_lens: tuple[int, ...] = (16, 32, 48), **kwargs: Any) -> SweepSpec:
    return SweepSpec(Problem(heads=1, head_dim=32), seq_lens, KernelConfig(16, 16), **kwargs)


def feed(model: ProgressModel, events: Any, clock: Clock, step: float = 2.0) -> list[str]:
    """Every event into ``model``, ``step`` seconds before each point ends; the notes it gave."""
    notes = []
    for event in events:
        if isinstance(event, PointFinished):
            clock.now += step
        note = model.update(event)
        if note:
            notes.append(note)
    return notes


def test_time_left_estimates_each_point_from_its_work() -> None:
    # A CPU sweep 512, 4k: the 512 point took 1 s, mostly filling the 0.25 s timing window
    # with 5 ms launches. The 4k point does 64 times the work: 10 launches of 320 ms and the
    # extras, not "the mean of the points before" (1 s; the real point took 32 s).
    cpu = TimeLeft([512, 4096], works=[512.0**2, 4096.0**2], min_samples=10)
    assert cpu.seconds_left() is None  # nothing to go on yet
    cpu.add(512, 1.0, latency_s=0.005, samples=50)
    launch = 0.005 * 64
    fixed = 1.0 - (50 + 5) * 0.005
    assert cpu.seconds_left() == pytest.approx(10 * launch + 5 * launch + fixed)
    assert cpu.seconds_left() > 5.0
    # A GPU sweep: every point fills the same timing window, whatever its work.
    gpu = TimeLeft([1024, 2048, 4096], works=[1.0, 4.0, 16.0], min_samples=10)
    gpu.add(1024, 0.5, latency_s=50e-6, samples=5000)
    assert gpu.seconds_left() == pytest.approx(1.0, rel=0.02)
    gpu.add(2048, 0.5, latency_s=200e-6, samples=1250)
    assert gpu.seconds_left() == pytest.approx(0.5, rel=0.02)
    # Causal does half the work of dense at the same length: half the time left.
    dense = TimeLeft([512, 4096], works=[2.0, 128.0], min_samples=10)
    causal = TimeLeft([512, 4096], works=[1.0, 64.0], min_samples=10)
    for left in (dense, causal):
        left.add(512, 0.5, latency_s=0.05, samples=10)
    assert causal.seconds_left() == pytest.approx(dense.seconds_left())  # the same per FLOP
    # Without launch facts (an older caller), the time scales with the work.
    plain = TimeLeft([64, 128], works=[1.0, 4.0])
    plain.add(64, 0.5)
    assert plain.seconds_left() == pytest.approx(2.0)


def test_a_job_says_each_points_work(db_path: Path) -> None:
    from workbench.run.events import JobStarted

    problem = Problem(batch=2, heads=3, head_dim=32)
    for mask, share in (("none", 1.0), ("causal", 0.5)):
        job = SweepJob(SweepSpec(problem, (16, 64), KernelConfig(16, 16, mask=mask)))
        with Store(db_path) as store:
            started = next(e for e in job.run(store, timing=QUICK) if isinstance(e, JobStarted))
        assert started.works == tuple(share * 4 * 2 * 3 * n * n * 32 for n in (16, 64))
        assert started.min_samples == QUICK.min_samples


def test_the_time_left_before_a_long_point_holds_on_a_real_sweep(db_path: Path) -> None:
    """A real reference sweep 1k, 4k: the estimate before the 4k point is within a few
    times what it took (the mean of past points was 16 times short). From 1k, not 256: a
    256 point's launches are mostly overhead, and a loaded machine moved their median enough
    to put the 256-fold extrapolation at 3.9 times the 4k point's wall time."""
    from workbench.run.events import PointStarted

    job = SweepJob(SweepSpec(Problem(heads=1, head_dim=64), (1024, 4096), KernelConfig(64, 64)))
    model = ProgressModel.for_job(job)
    timing = TimingSettings(warmup=1, min_samples=3, min_time_s=0.1)
    estimate, took, timed, started = None, None, 0.0, 0.0
    with Store(db_path) as store:
        for event in job.run(store, timing=timing):
            model.update(event)
            if isinstance(event, PointStarted) and event.index == 1:
                estimate, started = model.seconds_left, time.monotonic()
                assert model.text.endswith(" left"), model.text
            elif isinstance(event, PointFinished) and event.index == 1:
                took = time.monotonic() - started
                # Its timed launches, from their median: a preempted sample barely moves it.
                timed = event.point.samples * event.point.latency_ms / 1e3
    assert estimate is not None and took is not None
    print(
        f"benchmark: 4k point took {took:.2f} s ({timed:.2f} s timed), estimated {estimate:.2f} s"
    )
    # Short against what the point's launches alone cost, long against its whole wall time:
    # a loaded machine only stretches the wall time, which widens the bound, never breaks it.
    assert timed / 3 <= estimate <= took * 3


def test_durations_read_naturally() -> None:
    assert format_duration(4.2) == "4 s"
    assert format_duration(125) == "2 min 05 s"
    assert format_duration(3780) == "1 h 03 min"
    assert format_duration(-1) == "0 s"


def test_a_sweep_counts_its_points_and_estimates_the_rest(db_path: Path) -> None:
    clock = Clock()
    job = SweepJob(spec((16, 32, 48)))  # each point takes 2 s, whatever its length
    model = ProgressModel.for_job(job, clock=clock)
    assert (model.done, model.total, model.text) == (0, 3, "Starting…")
    texts = []
    with Store(db_path) as store:
        for event in job.run(store, timing=QUICK):
            if isinstance(event, PointFinished):
                clock.now += 2.0
            model.update(event)
            texts.append(model.text)
            if isinstance(event, PointFinished) and event.index == 0:
                # Two more points of 2 s (their launches of microseconds add nothing visible).
                assert model.seconds_left == pytest.approx(4.0, rel=0.01)
                assert model.text.endswith("· about 4 s left"), model.text
    run_id = model.run_ids[0]
    assert model.done == model.total == 3 and model.elapsed_s == pytest.approx(6.0)
    assert f"Run #{run_id}: point 2/3, N = 32 · about 4 s left" in texts
    outcome = model.outcome()
    assert outcome is not None and (outcome.status, outcome.line) == (
        "complete",
        f"Run #{run_id} complete",
    )


def test_a_group_says_its_runs_its_skips_and_how_it_ended(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpu_peers.register(monkeypatch)
    clock = Clock()
    job = GroupJob(spec((64, 128)), ("reference", "small-only"), "pair")
    model = ProgressModel.for_job(job, clock=clock)
    assert model.total == 4  # before the plan: every backend at every length
    with Store(db_path) as store:
        notes = feed(model, job.run(store, timing=QUICK), clock)
    gid = model.group_id
    assert model.total == model.done == 3  # the plan: small-only skips N = 128
    assert notes[0] == f"Group #{gid}: 2 runs, 3 points"
    assert notes[1] == f"{notes[0]} (small-only skips N = 128: too large for it)"
    assert notes[2:] == [f"Group #{gid}: run #{rid} complete" for rid in model.run_ids]
    assert model.text.startswith(f"Group #{gid} · Run #")
    outcome = model.outcome()
    assert outcome is not None and outcome.line == f"Group #{gid} complete: 2 runs, 3 points"
    assert outcome.failures == ()


def test_a_cancelled_ladder_names_its_step_and_keeps_saying_cancelling(db_path: Path) -> None:
    clock = Clock()
    ladder = load_ladder(arch="sm_90")
    total = len(ladder.steps)
    job = LadderJob(ladder, Problem(batch=1, heads=1, head_dim=32), (64, 128), "reference")
    model = ProgressModel.for_job(job, clock=clock)
    assert model.total == 2 * len(ladder.steps)
    finished = 0

    def cancel() -> bool:
        return finished >= 3  # into step 2

    with Store(db_path) as store:
        notes = []
        for event in job.run(store, timing=QUICK, cancel=cancel):
            if isinstance(event, PointFinished):
                finished += 1
                if finished == 3:
                    assert model.update(event) is None
                    step = ladder.steps[1].name
                    assert model.text.startswith(f"Ladder step 2/{total} ({step}) · ")
                    model.cancelling()
                    continue
            note = model.update(event)
            if note:
                notes.append(note)
            assert finished < 3 or model.text == "Cancelling…"
    gid = model.group_id
    assert notes[0] == f"Ladder #{gid}: {total} steps"
    second = ladder.steps[1].name
    assert f"Ladder step 2/{total} ({second}): run #{model.last_run_id} cancelled" in notes
    assert model.finished is not None and model.finished.status == "cancelled"
    outcome = model.outcome(cancelled=True)
    assert outcome is not None and outcome.status == "cancelled"
    assert outcome.line == f"Ladder #{gid} cancelled after 1 of {total} steps; kept as it is"


def test_a_failed_run_is_one_failure_line_with_its_error() -> None:
    from workbench.run.events import RunStarted, SweepStarted

    model = ProgressModel(SweepStory(), (16,))
    for event in (
        SweepStarted(1, (16,), run_ids=(7,), backends=("reference",)),
        RunStarted(7, 1),
        RunFinished(7, "failed", "BackendError: the kernel faulted\nTraceback ..."),
    ):
        model.update(event)
    outcome = model.outcome()
    assert outcome is not None and outcome.line == "Run #7 failed"
    assert outcome.failures == ("BackendError: the kernel faulted\nTraceback ...",)
    assert ProgressModel(SweepStory(), (16,)).outcome() is None  # refused: it never started


def test_the_printer_prints_each_point_with_the_time_left(db_path: Path) -> None:
    clock = Clock()
    out = io.StringIO()
    printer = ProgressPrinter(SweepStory(), out.write, clock=clock)
    with Store(db_path) as store:
        for event in SweepJob(spec((16, 32))).run(store, timing=QUICK):
            if isinstance(event, PointFinished):
                clock.now += 3.0
            printer(event)
    lines = out.getvalue().splitlines()
    assert lines[0] == "run 1: 2 point(s)"
    assert lines[1].startswith("  [1/2] N=16 … ") and lines[1].endswith("(about 3 s left)")
    assert lines[2].startswith("  [2/2] N=32 … ") and "left" not in lines[2]
    assert lines[3] == "run 1 complete"


def test_the_time_left_counts_down_while_a_point_runs() -> None:
    from workbench.run.events import PointStarted, SweepStarted
    from workbench.store import PointRecord

    clock = Clock()
    model = ProgressModel(SweepStory(), (512, 4096, 4096), clock=clock)
    model.update(SweepStarted(3, (512, 4096, 4096), run_ids=(1,), works=(1.0, 64.0, 64.0)))
    model.update(PointStarted(1, 0, 3, 512))
    clock.now += 1.0
    first = PointRecord(1, 512, 512, 512, 5.0, 4.9, 5.1, 4.8, 50, 1.0, 0.0, None, None, 1, 0, 0, 0)
    model.update(PointFinished(1, 0, 3, first, 1.0))
    model.update(PointStarted(1, 1, 3, 4096))
    at_start = model.seconds_left_now
    assert at_start is not None and at_start > 10  # two points of 64 times the work
    assert (
        model.live_text()
        == f"Run #1: point 2/3, N = 4,096 · about {format_duration(at_start)} left"
    )
    clock.now += 5.0
    assert model.seconds_left_now == pytest.approx(at_start - 5.0)
    assert f"about {format_duration(at_start - 5.0)} left" in model.live_text()
    clock.now += 1000.0  # far past this point's estimate: the point after it is still ahead
    assert model.seconds_left_now == pytest.approx(at_start / 2)
    model.cancelling()
    assert model.live_text() == "Cancelling…"


class _CtrlCAfterFlush(io.StringIO):
    """stderr where a Ctrl-C lands the moment a progress line has been flushed."""

    def flush(self) -> None:
        super().flush()
        if self.getvalue().endswith("…"):
            raise KeyboardInterrupt


def test_ctrl_c_just_after_a_point_line_is_shown_still_says_interrupted_on_its_own_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from workbench.cli.output import say_error
    from workbench.run import progress

    stderr = _CtrlCAfterFlush()
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setattr(progress, "_line_open", False)
    printer = ProgressPrinter()
    with pytest.raises(KeyboardInterrupt):
        printer.say("  [2/3] N=2048 …", end="")
    say_error("interrupted")
    assert stderr.getvalue().splitlines() == ["  [2/3] N=2048 …", "interrupted"]
