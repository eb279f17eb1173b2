"""The progress model: what the CLI prints and the window renders, from a job's own events."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from tests import cpu_peers
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.events import PointFinished, RunFinished
from workbench.jobs import GroupJob, LadderJob, SweepJob
from workbench.ladder import load_ladder
from workbench.progress import ProgressModel, ProgressPrinter, TimeLeft, format_duration
from workbench.store import Store
from workbench.stories import SweepStory
from workbench.timing import TimingSettings

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


def test_time_left_fits_fixed_and_quadratic_costs() -> None:
    # A CPU sweep: cost grows with N²; after two points the fit predicts the rest.
    cpu = TimeLeft([64, 128, 256, 512])
    assert cpu.seconds_left() is None  # nothing to go on yet
    cpu.add(64, 0.1 + 1e-6 * 64**2)
    cpu.add(128, 0.1 + 1e-6 * 128**2)
    assert cpu.seconds_left() == pytest.approx(0.2 + 1e-6 * (256**2 + 512**2))
    # A GPU sweep: every point costs about the same (the minimum timing window).
    gpu = TimeLeft([1024, 2048, 4096])
    gpu.add(1024, 0.5)
    assert gpu.seconds_left() == pytest.approx(1.0)  # one point: assume the same again
    gpu.add(2048, 0.5)
    assert gpu.seconds_left() == pytest.approx(0.5)
    # Noise that would make a term negative falls back to the other one alone.
    odd = TimeLeft([64, 128, 256])
    odd.add(64, 1.0)
    odd.add(128, 0.5)
    assert odd.seconds_left() == pytest.approx(0.75)


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
                assert model.seconds_left == pytest.approx(4.0)  # two more points of 2 s
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
    from workbench.events import RunStarted, SweepStarted

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
