"""The runner: what is stored when a sweep completes, is cancelled, or goes wrong half-way."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from workbench.backends.base import BackendError
from workbench.backends.reference import ReferenceBackend
from workbench.config import ConfigError, KernelConfig, Problem, SweepSpec
from workbench.jobs import BackendUnavailable, run_sweep
from workbench.measure.timing import TimingSettings
from workbench.run.events import PointFinished, PointStarted, RunFinished, RunStarted
from workbench.store import Store

QUICK = TimingSettings(warmup=0, min_samples=1, min_time_s=0.0)


def spec(seq_lens: tuple[int, ...] = (16, 32, 48), **kwargs: Any) -> SweepSpec:
    return SweepSpec(Problem(heads=2, kv_heads=1, head_dim=32), seq_lens, KernelConfig(), **kwargs)


class FailsAt(ReferenceBackend):
    """The reference, except that it breaks at one sequence length."""

    def __init__(self, seq_len: int, how: str) -> None:
        super().__init__()
        self.seq_len, self.how = seq_len, how

    def prepare(self, problem: Problem, config: KernelConfig, inputs: tuple) -> Callable:
        launch = super().prepare(problem, config, inputs)
        if problem.q_len != self.seq_len:
            return launch
        if self.how == "raise":
            raise BackendError("the kernel faulted (illegal address)")
        if self.how == "bug":
            raise ZeroDivisionError("a bug in a backend")

        def wrong() -> np.ndarray:
            out = launch()
            return out + np.random.default_rng().standard_normal(out.shape).astype(out.dtype)

        return wrong


class Unavailable(ReferenceBackend):
    def availability(self) -> Any:
        from workbench.backends.base import Availability

        return Availability(False, "no GPU here")


class SmallMemory(ReferenceBackend):
    def memory_capacity(self) -> int:
        return 1 << 20


def test_a_complete_sweep_emits_events_in_order(db_path: Path) -> None:
    with Store(db_path) as store:
        events = list(run_sweep(spec(), store, timing=QUICK))
        kinds = [type(e).__name__ for e in events]
        assert kinds == ["RunStarted"] + ["PointStarted", "PointFinished"] * 3 + ["RunFinished"]
        started, finished = events[0], events[-1]
        assert isinstance(started, RunStarted) and started.total == 3
        assert isinstance(finished, RunFinished) and finished.status == "complete"
        assert [e.seq_len for e in events if isinstance(e, PointStarted)] == [16, 32, 48]
        elapsed = [e.elapsed_s for e in events if isinstance(e, PointFinished)]
        assert elapsed == sorted(elapsed) and elapsed[0] > 0
        assert store.run(started.run_id).status == "complete"
        assert len(store.points(started.run_id)) == 3


def test_refusals_come_before_anything_is_written(db_path: Path, count_rows: Callable) -> None:
    with Store(db_path) as store:
        with pytest.raises(BackendUnavailable, match="no GPU here"):
            run_sweep(spec(), store, backend=Unavailable())
        # The last length does not fit the backend's memory: refused before the first point.
        with pytest.raises(ConfigError, match="GiB"):
            run_sweep(spec((16, 32, 8192)), store, backend=SmallMemory())
    assert count_rows(db_path, "runs") == 0


def test_cancel_between_points_keeps_what_was_measured(db_path: Path) -> None:
    with Store(db_path) as store:
        finished = 0

        def cancel() -> bool:
            return finished >= 1

        for event in run_sweep(spec(), store, timing=QUICK, cancel=cancel):
            if isinstance(event, PointFinished):
                finished += 1
            last = event
        assert isinstance(last, RunFinished) and last.status == "cancelled"
        assert store.run(last.run_id).status == "cancelled"
        assert [p.seq_len for p in store.points(last.run_id)] == [16]


def test_a_consumer_that_stops_listening_leaves_a_cancelled_run(db_path: Path) -> None:
    with Store(db_path) as store:
        events = run_sweep(spec(), store, timing=QUICK)
        for event in events:
            if isinstance(event, PointFinished):
                run_id = event.run_id
                break
        events.close()  # the window was closed mid-sweep
        run = store.run(run_id)
        assert run.status == "cancelled" and "stopped" in (run.error or "")
        assert len(store.points(run_id)) == 1


@pytest.mark.parametrize(
    ("how", "status", "message"),
    [
        ("raise", "failed", "BackendError: the kernel faulted"),
        ("bug", "failed", "ZeroDivisionError: a bug in a backend"),
        ("wrong", "failed", "wrong result at N=32"),
    ],
)
def test_a_failure_half_way_marks_the_run_and_keeps_earlier_points(
    how: str, status: str, message: str, db_path: Path
) -> None:
    with Store(db_path) as store:
        events = list(run_sweep(spec(), store, timing=QUICK, backend=FailsAt(32, how)))
        last = events[-1]
        assert isinstance(last, RunFinished) and last.status == status
        assert message in (last.error or "")
        run = store.run(last.run_id)
        assert run.status == status and message in (run.error or "")
        stored = [p.seq_len for p in store.points(run.id)]
        if how == "wrong":
            # The wrong point is kept (so it can be inspected) and the sweep stops there.
            assert stored == [16, 32]
            bad = store.points(run.id)[1]
            assert bad.rel_err is not None and bad.rel_err > 0.1
        else:
            assert stored == [16]
        assert 48 not in stored


def test_a_fixed_seed_reproduces_the_inputs(db_path: Path) -> None:
    seed = int.from_bytes(os.urandom(4), "little")
    with Store(db_path) as store:
        errors = []
        for _ in range(2):
            events = list(run_sweep(spec(seed=seed), store, timing=QUICK))
            errors.append([p.rel_err for p in store.points(events[-1].run_id)])
        fresh = list(run_sweep(spec(), store, timing=QUICK))
        fresh_errors = [p.rel_err for p in store.points(fresh[-1].run_id)]
    assert errors[0] == errors[1]  # same inputs, same sampled rows, same arithmetic
    assert fresh_errors != errors[0]  # no seed: fresh random inputs


def test_a_tree_without_git_takes_its_commit_from_the_environment(monkeypatch, tmp_path):
    import workbench.measure.machine as machine

    fake_module = tmp_path / "workbench" / "machine.py"
    fake_module.parent.mkdir()
    fake_module.write_text("")
    monkeypatch.setattr(machine, "__file__", str(fake_module))
    monkeypatch.setenv("FMHA_WORKBENCH_COMMIT", "abc123def456")
    machine.git_commit.cache_clear()
    try:
        assert machine.git_commit() == "abc123def456"
    finally:
        machine.git_commit.cache_clear()


def test_a_named_commit_wins_over_an_older_checkout_the_tree_was_copied_with(monkeypatch):
    """A GPU host's copy of the tree can carry an older .git: the commit the caller names is
    the one the runs record, not that checkout's HEAD marked dirty."""
    import workbench.measure.machine as machine

    monkeypatch.setenv("FMHA_WORKBENCH_COMMIT", "9f6d6e4")
    machine.git_commit.cache_clear()
    try:
        assert machine.git_commit() == "9f6d6e4"
        monkeypatch.delenv("FMHA_WORKBENCH_COMMIT")
        machine.git_commit.cache_clear()
        import subprocess

        root = Path(__file__).resolve().parents[1]
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        # This checkout's own HEAD (CI runs a clone), marked dirty where the tree is edited.
        assert machine.git_commit() in (head, f"{head}-dirty")
    finally:
        machine.git_commit.cache_clear()


def test_a_sweep_job_checks_at_preflight_and_where_a_point_opens(monkeypatch, tmp_path) -> None:
    """Preflight is the job's, and each point checks again where it computes (in the GPU
    engine's process, for a GPU backend); the run between them does not ask a third time."""
    from workbench.backends.reference import ReferenceBackend
    from workbench.config import KernelConfig, Problem, SweepSpec
    from workbench.jobs import SweepJob
    from workbench.measure.timing import TimingSettings
    from workbench.store import Store

    asked: list[int] = []
    original = ReferenceBackend.check_supported

    def counting(self, problem, config):  # type: ignore[no-untyped-def]
        asked.append(problem.q_len)
        return original(self, problem, config)

    monkeypatch.setattr(ReferenceBackend, "check_supported", counting)
    spec = SweepSpec(Problem(heads=1, head_dim=32), (16, 32), KernelConfig(), backend="reference")
    quick = TimingSettings(warmup=0, min_samples=1, min_time_s=0.0)
    with Store(tmp_path / "runs.db") as store:
        list(SweepJob(spec).run(store, timing=quick))
    assert sorted(asked) == [16, 16, 32, 32]


def test_each_job_asks_each_backend_once_whether_it_is_available(monkeypatch, tmp_path) -> None:
    """A GPU backend's availability probes the device: a job's preflight asks it once per
    backend, not once per length or per ladder step."""
    from tests import cpu_peers
    from workbench.jobs import GroupJob, LadderJob, SweepJob
    from workbench.jobs.ladder_steps import Ladder, LadderStep

    cpu_peers.register(monkeypatch)
    probes: list[str] = []
    original = ReferenceBackend.availability

    def counting(self):  # type: ignore[no-untyped-def]
        probes.append(self.name)
        return original(self)

    monkeypatch.setattr(ReferenceBackend, "availability", counting)
    spec = SweepSpec(
        Problem(heads=1, head_dim=32), (16, 32, 48, 64), KernelConfig(), backend="reference"
    )
    SweepJob(spec).preflight()
    assert probes == ["reference"]
    probes.clear()
    GroupJob(spec, ("reference", cpu_peers.NAME)).preflight()
    assert sorted(probes) == sorted(["reference", cpu_peers.NAME])
    probes.clear()
    steps = tuple(LadderStep(f"s{i}", KernelConfig(tile_m=16 * 2**i)) for i in range(3))
    LadderJob(Ladder("three", steps, {}), spec.problem, spec.seq_lens, "reference").preflight()
    assert probes == ["reference"]
