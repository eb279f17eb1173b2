"""GroupJob: a group sweep as one job, planned and refused in the core, one event stream."""

from __future__ import annotations

from typing import Any

import pytest

import workbench.backends as backends
from workbench.backends.base import Availability
from workbench.backends.reference import ReferenceBackend
from workbench.config import ConfigError, KernelConfig, Problem, SweepSpec
from workbench.jobs import GroupJob, GroupStarted
from workbench.measure.timing import TimingSettings
from workbench.run.events import JobFinished, PointFinished, RunFinished, Skipped
from workbench.store import Store

QUICK = TimingSettings(warmup=0, min_samples=1, min_time_s=0.0)


class SecondReference(ReferenceBackend):
    """A second CPU backend for groups (test-only)."""

    name = "reference-b"


class GoneBackend(ReferenceBackend):
    name = "gone"

    def availability(self) -> Availability:
        return Availability(False, "no such device: install the driver")


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (SecondReference, GoneBackend):
        declared = backends.BackendDeclaration(cls.name, cls.description, cls, in_engine=False)
        monkeypatch.setitem(backends._REGISTRY, cls.name, declared)


def spec(**kwargs: Any) -> SweepSpec:
    return SweepSpec(
        Problem(batch=1, heads=1, head_dim=32),
        (64, 128),
        KernelConfig(tile_m=32, tile_n=32),
        **kwargs,
    )


def test_a_group_job_needs_two_distinct_backends() -> None:
    with pytest.raises(ConfigError) as one:
        GroupJob(spec(), ("reference",))
    assert one.value.field == "backends"
    with pytest.raises(ConfigError, match="distinct"):
        GroupJob(spec(), ("reference", " reference"))
    assert GroupJob(spec(), (" reference", "naive")).backends == ("reference", "naive")


@pytest.mark.usefixtures("registry")
@pytest.mark.parametrize("name", ["gone", "nope"])
def test_an_unavailable_or_unknown_member_refuses_the_job_before_writing(
    tmp_path: Any, name: str
) -> None:
    with Store(tmp_path / "runs.db") as store:
        with pytest.raises(ConfigError) as refused:
            list(GroupJob(spec(), ("reference", name)).run(store, timing=QUICK))
        assert refused.value.field == "backends" and refused.value.value == name
        assert store.count_runs() == 0 and store.groups() == []
    if name == "gone":
        assert "install the driver" in str(refused.value)


@pytest.mark.usefixtures("registry")
def test_a_group_job_runs_one_run_per_backend_on_the_same_inputs(tmp_path: Any) -> None:
    job = GroupJob(spec(label="pair"), ("reference", "reference-b"))
    with Store(tmp_path / "runs.db") as store:
        events = list(job.run(store, timing=QUICK))
        started = events[0]
        assert isinstance(started, GroupStarted) and started.total == 4
        assert started.backends == ("reference", "reference-b")
        assert started.lengths == (64, 64, 128, 128)  # every backend at a length, then the next
        assert events[-1] == JobFinished(
            "complete",
            tuple((e.run_id, "complete", None) for e in events[1:] if isinstance(e, RunFinished)),
        )
        finished = [e for e in events if isinstance(e, RunFinished)]
        assert [e.status for e in finished] == ["complete", "complete"]
        assert len([e for e in events if isinstance(e, PointFinished)]) == 4
        runs = store.group_runs(started.group_id)
        assert [r.backend for r in runs] == ["reference", "reference-b"]
        assert {r.label for r in runs} == {"pair"}
        assert isinstance(store.group(started.group_id)["spec"]["seed"], int)
        # Same inputs, same arithmetic: the two CPU backends' errors agree exactly.
        a, b = (store.points(r.id) for r in runs)
        assert [p.seq_len for p in a] == [p.seq_len for p in b] == [64, 128]
        assert [p.max_abs_err for p in a] == [p.max_abs_err for p in b]


@pytest.mark.usefixtures("registry")
def test_a_group_preflight_leaves_out_what_a_backend_cannot_fit_and_the_stream_says_so(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests import cpu_peers

    cpu_peers.register(monkeypatch)
    job = GroupJob(spec(), ("reference", "small-only"))
    plan = job.preflight()  # nothing is written: there is no store yet
    assert [b.name for b in plan.backends] == ["reference", "small-only"]
    assert plan.lengths == (64, 64, 128) and plan.total == 3
    assert [(s.backend, s.seq_len) for s in plan.skipped] == [("small-only", 128)]
    with Store(tmp_path / "runs.db") as store:
        events = list(job.run(store, plan=plan, timing=QUICK))
    assert isinstance(events[0], GroupStarted) and events[0].total == 3
    assert [e for e in events if isinstance(e, Skipped)] == list(plan.skipped)
    assert events[-1].status == "complete"
