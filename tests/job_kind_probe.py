"""A kind of job the workbench has never heard of, for tests/test_job_kinds.py and its window
twin: a "probe" measures its spec twice (two runs, stored up front) on the reference backend,
and its story says how it reads. Nothing in workbench/ names it; if a front end needs an edit
to run it, the switch that edit would add is what those tests catch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workbench.config import ConfigError, KernelConfig, Problem, SweepSpec
from workbench.jobs.base import Job, Plan, Timing, backend_for, check_points, timing_for
from workbench.jobs.sweep import run_sweep
from workbench.measure.machine import host_info
from workbench.run.events import Event, JobStarted, RunEvent, RunFinished, RunStarted
from workbench.run.stories import JobStory, Outcome, first_line
from workbench.store import Store

PROBE_FAILURE = "the probe's second run fails on purpose\n(its second line)"


@dataclass(frozen=True)
class ProbeStarted(JobStarted):
    kind: ClassVar[str] = "probe"


class ProbeRefused(ConfigError):
    """A probe that cannot run as set (no form field to mark)."""


class ProbeStory(JobStory):
    noun = "probe"
    failure_title = "Probe failed"
    failure_kept = "both probe runs are kept"
    selects_its_runs = True

    def prefix(self, model: Any) -> str:
        if not model.run_ids:
            return ""
        return f"Probe {min(len(model.ended) + 1, len(model.run_ids))}/{len(model.run_ids)} · "

    def started_note(self, model: Any, event: JobStarted) -> str | None:
        return f"Probe: {len(event.run_ids)} runs"

    def started_line(self, event: JobStarted) -> str | None:
        return f"probe of runs {', '.join(f'#{r}' for r in event.run_ids)}"

    def run_note(self, model: Any, event: RunFinished) -> str | None:
        return f"Probe run #{event.run_id} {event.status}"

    def refusal(self, exc: Exception) -> str | None:
        return f"The probe cannot run as set:\n\n{exc}" if isinstance(exc, ProbeRefused) else None

    def outcome(self, model: Any, status: str, how: str) -> Outcome:
        failed = tuple(
            f"probe run #{rid}: {first_line(error)}"
            for rid, (run_status, error) in sorted(model.ended.items())
            if run_status == "failed"
        )
        if failed:
            return Outcome(self, "failed", f"Probe: {len(failed)} run(s) failed", failed)
        return Outcome(self, status, f"Probe done: {len(model.ended)} runs, {model.done} points")


@dataclass(frozen=True)
class ProbeJob(Job):
    spec: SweepSpec
    fail_second: bool = False  # the second run fails (stored failed, with PROBE_FAILURE)
    refuse: bool = False  # the preflight refuses it as set
    kind: ClassVar[str] = "probe"
    story: ClassVar[JobStory] = ProbeStory()

    @property
    def backends(self) -> tuple[str, ...]:
        return (self.spec.backend,)

    def planned_lengths(self) -> tuple[int, ...]:
        runs = 1 if self.fail_second else 2
        return tuple(self.spec.seq_lens) * runs

    def preflight(self) -> Plan:
        if self.refuse:
            raise ProbeRefused("probe", "as set", "a probe refused on purpose")
        backend = backend_for(self.spec.backend)
        check_points(self.spec, backend)
        return Plan((backend,), self.planned_lengths())

    def measure(
        self, store: Store, plan: Plan, timing: Timing, cancel: Callable[[], bool] | None
    ) -> Iterator[Event]:
        (backend,) = plan.backends
        settings = timing_for(timing, backend)

        def sweep() -> Iterator[RunEvent]:
            return run_sweep(
                self.spec, store, cancel=cancel, timing=settings, backend=backend, checked=True
            )

        first = sweep()
        first_started = next(first)
        second = self._failing_run(store) if self.fail_second else sweep()
        second_started = next(second)
        run_ids = (first_started.run_id, second_started.run_id)
        yield ProbeStarted(plan.total, plan.lengths, run_ids=run_ids, backends=self.backends)
        yield first_started
        yield from first
        yield second_started
        yield from second

    def _failing_run(self, store: Store) -> Iterator[RunEvent]:
        run_id = store.create_run(self.spec, host_info())
        yield RunStarted(run_id, 0)
        store.finish_run(run_id, "failed", PROBE_FAILURE)
        yield RunFinished(run_id, "failed", PROBE_FAILURE)


def random_probe_spec() -> tuple[SweepSpec, int]:
    """A tiny reference spec at two lengths drawn fresh (the seed is printed)."""
    seed = int(np.random.SeedSequence().entropy % 2**32)
    print(f"probe lengths seed: {seed}")
    rng = np.random.default_rng(seed)
    lengths = tuple(sorted(int(n) for n in rng.choice([16, 32, 48, 64, 80], 2, replace=False)))
    problem = Problem(batch=1, heads=1, head_dim=32)
    return SweepSpec(problem, lengths, KernelConfig(16, 16), seed=seed), seed
