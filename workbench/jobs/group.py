"""Group jobs: several backends on the same inputs, timed interleaved, stored as one group.

The CLI's ``--backends`` and the window's backend list both run a :class:`GroupJob`, planned by
:func:`plan_group` and run by :func:`run_group`. At each sequence length every backend of the
group gets the same fresh inputs (one seed per length for the whole group), is compiled and
checked against float64, and then all of them are timed together in rounds whose order is balanced
(:func:`workbench.measure.timing.measure_interleaved`), so none inherits a better or worse GPU clock
than another. Each backend's points go to its own run; the runs share a group, and Compare
opens the group as one unit.

GPU backends run in the supervised engine child, so their group point is one engine call and
they are interleaved there; a CPU backend in the same group is interleaved with the other CPU
backends in this process (the two sets are timed one after the other).
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from workbench.backends import Backend, get_backend
from workbench.backends.interleave import Outcome, interleaved_point
from workbench.backends.isolated import IsolatedBackend, group_in_engine
from workbench.config import AXIS_LABELS, ConfigError, KernelConfig, Problem, SweepSpec
from workbench.jobs.base import (
    Job,
    Plan,
    Timing,
    backend_for,
    check_available,
    check_points,
    job_names,
    point_work,
    timing_for,
)
from workbench.measure.machine import host_info
from workbench.measure.timing import TimingSettings
from workbench.run.events import (
    Event,
    GroupStarted,
    PointFinished,
    PointStarted,
    RunFinished,
    RunStarted,
    Skipped,
)
from workbench.run.stories import GroupStory, JobStory
from workbench.store import Store, StoreError, StoreLocked
from workbench.store.disk_room import too_little_room

GROUP_KIND = "backends"


@dataclass(frozen=True)
class GroupPlan:
    """What a group will run, checked: one spec per backend (same problem, seed and label)."""

    specs: tuple[SweepSpec, ...]
    skipped: tuple[Skipped, ...] = ()
    label: str = ""

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(spec.backend for spec in self.specs)

    @property
    def total(self) -> int:
        return sum(len(spec.seq_lens) for spec in self.specs)

    @property
    def lengths(self) -> tuple[int, ...]:
        """Each point's length in measuring order: every backend at a length, then the next."""
        lengths = sorted({n for spec in self.specs for n in spec.seq_lens})
        return tuple(n for n in lengths for spec in self.specs if n in spec.seq_lens)


class GroupError(ConfigError):
    """A group that cannot run at all (no backend, duplicates, nothing fits)."""


def group_specs(spec: SweepSpec, backends: Sequence[str]) -> list[SweepSpec]:
    """``spec`` once per backend, with one seed for all of them (drawn when ``spec`` has
    none), so every backend sees the same inputs."""
    names = job_names(backends)
    if not names:
        raise GroupError("backends", list(backends), "expected at least one backend name")
    if len(set(names)) != len(names):
        raise GroupError("backends", names, "expected distinct backend names")
    seed = spec.seed if spec.seed is not None else secrets.randbits(32)
    return [dataclasses.replace(spec, backend=name, seed=seed) for name in names]


def plan_group(
    specs: Sequence[SweepSpec],
    backends: Sequence[Backend] | None = None,
    *,
    label: str = "",
    available: bool = False,
) -> tuple[GroupPlan, list[Backend]]:
    """Check a group before anything is written (``available``: the caller has asked each
    backend whether it is available already, as :meth:`GroupJob.preflight` does).

    An unavailable backend or a bad knob refuses the whole group (raises, like a single
    sweep); a length that one backend cannot fit (naive attention whose N×N scores do not
    fit) is left out for that backend alone and listed in ``skipped``.
    """
    backends = list(backends) if backends is not None else [get_backend(s.backend) for s in specs]
    kept_specs, kept_backends, skipped = [], [], []
    for spec, backend in zip(specs, backends, strict=True):
        if not available:
            check_available(spec, backend)  # once per backend: each probe asks the GPU
        fits = []
        for n in spec.seq_lens:
            try:
                check_points(dataclasses.replace(spec, seq_lens=(n,)), backend)
                fits.append(n)
            except ConfigError as exc:
                if exc.field != "q_len":  # only a size refusal is per length
                    raise
                skipped.append(Skipped(spec.backend, n, exc.allowed))
        if fits:
            kept_specs.append(dataclasses.replace(spec, seq_lens=tuple(fits)))
            kept_backends.append(backend)
    if not kept_specs:
        raise GroupError(
            "seq_lens",
            list(specs[0].seq_lens) if specs else [],
            "no backend of the group can run any of these sequence lengths",
        )
    return GroupPlan(tuple(kept_specs), tuple(skipped), label), kept_backends


def run_group(
    plan: GroupPlan,
    store: Store,
    *,
    backends: Sequence[Backend] | None = None,
    timings: Sequence[TimingSettings] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> Iterator[Event]:
    """Store the group and one run per backend, then measure; returns the event stream.

    ``timings``: one per backend (default: each backend's own); a group's rounds are at least
    the largest ``rounds`` of them."""
    backends = (
        list(backends) if backends is not None else [get_backend(s.backend) for s in plan.specs]
    )
    timings = list(timings) if timings is not None else [b.default_timing() for b in backends]
    names = list(plan.backends)
    group_id = store.create_group(
        GROUP_KIND,
        plan.label or ", ".join(names),
        {"backends": names, "seed": plan.specs[0].seed, "order": "balanced interleaved rounds"},
    )
    run_ids = []
    for spec, backend in zip(plan.specs, backends, strict=True):
        machine = {**host_info(), **backend.machine_info()}
        labelled = dataclasses.replace(spec, label=plan.label or spec.label)
        run_ids.append(store.create_run(labelled, machine, group_id=group_id, step=spec.backend))
    return _measure_group(plan, store, backends, timings, group_id, run_ids, cancel)


class _GroupStopped(Exception):
    """A point could not be stored: every active run ends failed with the reason."""


def _measure_group(
    plan: GroupPlan,
    store: Store,
    backends: list[Backend],
    timings: list[TimingSettings],
    group_id: int,
    run_ids: list[int],
    cancel: Callable[[], bool] | None,
) -> Iterator[Event]:
    specs = plan.specs
    order = sorted({n for spec in specs for n in spec.seq_lens})  # plan.lengths' order
    yield GroupStarted(
        plan.total,
        plan.lengths,
        run_ids=tuple(run_ids),
        group_id=group_id,
        backends=plan.backends,
        axis=specs[0].axis,
        works=tuple(
            point_work(spec.problem, spec.config, n, spec.axis)
            for n in order
            for spec in specs
            if n in spec.seq_lens
        ),
        min_samples=min(t.min_samples for t in timings),
    )
    yield from plan.skipped
    for spec, run_id in zip(specs, run_ids, strict=True):
        yield RunStarted(run_id, len(spec.seq_lens))
    lengths = sorted({n for spec in specs for n in spec.seq_lens})
    seeds = dict(zip(lengths, np.random.SeedSequence(specs[0].seed).spawn(len(lengths))))
    status = {i: "complete" for i in range(len(specs))}
    errors: dict[int, str | None] = {i: None for i in range(len(specs))}
    active = set(range(len(specs)))
    done = [0] * len(specs)
    started = time.perf_counter()

    def finish(i: int) -> RunFinished:
        active.discard(i)
        store.finish_run(run_ids[i], status[i], errors[i])
        return RunFinished(run_ids[i], status[i], errors[i])

    def stop_all(reason: str) -> None:
        for i in sorted(active):
            status[i], errors[i] = "failed", f"{reason} (the points before it are kept)"

    try:
        for n in lengths:
            if cancel is not None and cancel():
                for i in sorted(active):
                    status[i] = "cancelled"
                break
            full = too_little_room(store.path)
            if full is not None:  # stop while the store can still say why (issue 51 item 8)
                stop_all(f"stopped before {AXIS_LABELS[specs[0].axis]}={n}: {full}")
                break
            members = [i for i in sorted(active) if n in specs[i].seq_lens]
            if not members:
                continue
            for i in members:
                yield PointStarted(run_ids[i], done[i], len(specs[i].seq_lens), n)
            outcomes = measure_group_point(
                [backends[i] for i in members],
                [specs[i].problem.at(specs[i].axis, n) for i in members],
                [specs[i].config for i in members],
                [timings[i] for i in members],
                seeds[n],
            )
            for i, outcome in zip(members, outcomes, strict=True):
                if isinstance(outcome, str):
                    status[i], errors[i] = "failed", outcome
                    yield finish(i)
                    continue
                try:
                    point = store.add_point(run_ids[i], outcome, seq_len=n)
                except StoreLocked:
                    raise
                except StoreError as exc:  # a full disk: the point is lost, the runs end with why
                    stop_all(f"stopped at {AXIS_LABELS[specs[0].axis]}={n}: {exc}")
                    raise _GroupStopped from exc
                done[i] += 1
                elapsed = time.perf_counter() - started
                yield PointFinished(run_ids[i], done[i] - 1, len(specs[i].seq_lens), point, elapsed)
                if not outcome.accuracy.passed:
                    status[i] = "failed"
                    errors[i] = (
                        f"wrong result at {AXIS_LABELS[specs[i].axis]}={n}: relative error "
                        f"{outcome.accuracy.rel_err:.3g} "
                        f"against float64 exceeds {outcome.accuracy.tolerance:g}"
                    )
                    yield finish(i)
    except _GroupStopped:
        pass
    except (KeyboardInterrupt, GeneratorExit):
        for i in sorted(active):
            status[i], errors[i] = "cancelled", "stopped before the group finished"
            finish(i)
        raise
    except Exception as exc:  # no run is left "running" in the store
        for i in sorted(active):
            status[i], errors[i] = "failed", f"{type(exc).__name__}: {exc}"
            yield finish(i)
        raise
    for i in sorted(active):
        yield finish(i)


# --- one length of a group ------------------------------------------------------------------


def measure_group_point(
    backends: Sequence[Backend],
    problems: Sequence[Problem],
    configs: Sequence[KernelConfig],
    timings: Sequence[TimingSettings],
    seed: np.random.SeedSequence,
) -> list[Outcome]:
    """One length for several backends: the same inputs, timed interleaved.

    Backends that run in the GPU engine are measured there in one call; the others here."""

    outcomes: list[Outcome | None] = [None] * len(backends)
    engine_members = [i for i, b in enumerate(backends) if isinstance(b, IsolatedBackend)]
    local_members = [i for i in range(len(backends)) if i not in engine_members]
    for members, measure in (
        (engine_members, group_in_engine),
        (local_members, interleaved_point),
    ):
        if not members:
            continue
        results = measure(
            [backends[i] for i in members],
            [problems[i] for i in members],
            [configs[i] for i in members],
            [timings[i] for i in members],
            seed,
        )
        for i, result in zip(members, results, strict=True):
            outcomes[i] = result
    return [o for o in outcomes if o is not None]


# --- a group as one job -------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupJob(Job):
    """A group sweep as one picklable job: a sweep and the backends to run it on.

    ``spec.backend`` is ignored; every name in ``backends`` gets the same problem, lengths,
    config and seed (:func:`group_specs`). The names are checked here, so a job that cannot
    be a group is never built; whether the backends can run is :meth:`preflight`'s question,
    asked where the job runs."""

    spec: SweepSpec
    backends: tuple[str, ...]
    label: str = ""
    kind: ClassVar[str] = "group"
    story: ClassVar[JobStory] = GroupStory()

    def __post_init__(self) -> None:
        names = tuple(name.strip() for name in self.backends)
        if len(names) < 2:
            raise GroupError("backends", list(names), "expected at least two backends for a group")
        if len(set(names)) != len(names):
            raise GroupError("backends", list(names), "expected distinct backend names")
        object.__setattr__(self, "backends", names)

    def planned_lengths(self) -> tuple[int, ...]:
        """Every backend at every length, shortest first (before a backend skips any)."""
        return tuple(n for n in sorted(self.spec.seq_lens) for _ in self.backends)

    def preflight(self) -> Plan:
        """:func:`plan_group` for the job, every refusal a ConfigError naming ``backends`` (an
        unknown or unavailable backend) or the knob at fault, before anything is written."""
        backends = [backend_for(name) for name in self.backends]  # each asked once
        specs = group_specs(self.spec, self.backends)
        plan, kept = plan_group(
            specs, backends, label=self.label or self.spec.label, available=True
        )
        return Plan(tuple(kept), plan.lengths, plan.skipped, plan)

    def measure(
        self, store: Store, plan: Plan, timing: Timing, cancel: Callable[[], bool] | None
    ) -> Iterator[Event]:
        timings = [timing_for(timing, backend) for backend in plan.backends]
        return run_group(plan.detail, store, backends=plan.backends, timings=timings, cancel=cancel)
