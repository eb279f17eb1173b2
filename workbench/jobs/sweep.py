"""Sweep jobs: one run of one backend over a list of sequence lengths.

:func:`run_sweep` is the measuring loop every job is built on (a group's members and a ladder's
steps are sweeps too): it stores the run, measures each sequence length, checks its output
against float64 and commits the point at once. A cancel request is honoured between points; a
backend failure ends the run as 'failed' with the error text and the points already measured.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workbench.analysis.resources import ResourceService, point_resources
from workbench.backends import Backend, get_backend
from workbench.backends.base import BackendError, PointResult
from workbench.config import AXIS_LABELS, ConfigError, SweepSpec
from workbench.jobs.base import (
    Job,
    Plan,
    Timing,
    backend_for,
    check_available,
    check_points,
    point_work,
    prepend,
    timing_for,
)
from workbench.measure.machine import host_info
from workbench.measure.timing import TimingSettings
from workbench.run import stop_reason
from workbench.run.events import (
    Event,
    PointFinished,
    PointStarted,
    RunEvent,
    RunFinished,
    RunStarted,
    SweepStarted,
)
from workbench.run.stories import JobStory, SweepStory, first_line
from workbench.store import Store, StoreError, StoreLocked, StoreWriteFailed
from workbench.store.disk_room import too_little_room


@dataclass(frozen=True)
class SweepJob(Job):
    """One sweep: one run of ``spec`` on ``spec.backend``."""

    spec: SweepSpec
    kind: ClassVar[str] = "sweep"
    story: ClassVar[JobStory] = SweepStory()

    @property
    def backend(self) -> str:
        return self.spec.backend

    @property
    def backends(self) -> tuple[str, ...]:
        return (self.spec.backend,)

    @property
    def label(self) -> str:
        return self.spec.label

    def planned_lengths(self) -> tuple[int, ...]:
        return tuple(self.spec.seq_lens)

    def preflight(self) -> Plan:
        backend = backend_for(self.spec.backend)  # asks whether it is available
        check_points(self.spec, backend)
        return Plan((backend,), self.planned_lengths())

    def measure(
        self, store: Store, plan: Plan, timing: Timing, cancel: Callable[[], bool] | None
    ) -> Iterator[Event]:
        (backend,) = plan.backends
        settings = timing_for(timing, backend)
        events = run_sweep(
            self.spec,
            store,
            cancel=cancel,
            timing=settings,
            backend=backend,
            checked=True,
        )
        first = next(events)  # RunStarted: the run is stored
        started = SweepStarted(
            plan.total,
            plan.lengths,
            run_ids=(first.run_id,),
            backends=self.backends,
            axis=self.spec.axis,
            works=tuple(
                point_work(self.spec.problem, self.spec.config, n, self.spec.axis)
                for n in plan.lengths
            ),
            min_samples=settings.min_samples,
        )
        return prepend((started, first), events)


def run_sweep(
    spec: SweepSpec,
    store: Store,
    *,
    cancel: Callable[[], bool] | None = None,
    timing: TimingSettings | None = None,
    backend: Backend | None = None,
    group_id: int | None = None,
    step: str | None = None,
    checked: bool = False,
    resources: ResourceService | None = None,
) -> Iterator[RunEvent]:
    """Measure ``spec`` and store it. Raises ConfigError / BackendUnavailable before writing
    (unless ``checked``: a job's preflight already asked the backend). Each point of a
    compiled backend (cuTile) is stored with what its launch compiled to on the run's GPU
    (``resources``: the service that answers, cached on disk; by default the user's cache)."""
    backend = backend or get_backend(spec.backend)
    if not checked:
        check_available(spec, backend)
        check_points(spec, backend)
    settings = timing or backend.default_timing()
    machine = {**host_info(), **backend.machine_info()}
    run_id = store.create_run(spec, machine, group_id=group_id, step=step)
    compiled = _Compiled(resources or ResourceService(), machine)
    return _measure(spec, store, backend, settings, run_id, cancel, compiled)


@dataclass(frozen=True)
class _Compiled:
    """Where a point's compiled resources come from: the service and the run's machine."""

    service: ResourceService
    machine: dict[str, Any]

    def attach(self, backend: str, spec: SweepSpec, result: PointResult) -> None:
        found = point_resources(
            self.service, backend, result.problem, spec.config, result.extra, self.machine
        )
        if found is not None:
            result.extra["resources"] = found


def _measure(
    spec: SweepSpec,
    store: Store,
    backend: Backend,
    settings: TimingSettings,
    run_id: int,
    cancel: Callable[[], bool] | None,
    compiled: _Compiled,
) -> Iterator[RunEvent]:
    problems = spec.problems()
    total = len(problems)
    # One seed per run: reproducible when the spec fixes it, fresh otherwise.
    seed_seq = np.random.SeedSequence(spec.seed)
    started = time.perf_counter()
    status, error = "complete", None
    try:
        yield RunStarted(run_id, total)
        for index, (problem, child_seed) in enumerate(zip(problems, seed_seq.spawn(total))):
            if cancel is not None and cancel():
                status = "cancelled"
                break
            x = spec.x_of(problem)
            full = too_little_room(store.path)
            if full is not None:
                status, error = "failed", f"stopped before {AXIS_LABELS[spec.axis]}={x}: {full}"
                error += "; the points before it are kept: free some space and sweep again"
                break
            yield PointStarted(run_id, index, total, x)
            result = backend.measure_point(
                problem, spec.config, settings, np.random.default_rng(child_seed)
            )
            compiled.attach(backend.name, spec, result)
            try:
                point = store.add_point(run_id, result, seq_len=x)
            except StoreLocked as exc:
                status, error = "failed", _locked_error(store, run_id, result, x, exc)
                break
            except StoreError as exc:  # a full disk: the point is lost, the run ends with why
                status, at = "failed", f"{AXIS_LABELS[spec.axis]}={x}"
                error = f"stopped at {at}: {exc} (the points before it are kept)"
                break
            yield PointFinished(run_id, index, total, point, time.perf_counter() - started)
            if not result.accuracy.passed:
                status = "failed"
                error = (
                    f"wrong result at {AXIS_LABELS[spec.axis]}={x}: relative error "
                    f"{result.accuracy.rel_err:.3g} against float64 exceeds "
                    f"{result.accuracy.tolerance:g}"
                )
                break
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM at the CLI (its own message)
        store.finish_run(run_id, "cancelled", str(exc) or "interrupted by the user")
        raise
    except GeneratorExit:
        # The consumer stopped listening (window closed, Ctrl-C in a caller): keep what we have.
        store.finish_run(
            run_id, "cancelled", stop_reason.reason_or("stopped before the sweep finished")
        )
        raise
    except (BackendError, ConfigError, MemoryError, RuntimeError, OSError, ValueError) as exc:
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # an unexpected bug still leaves the run marked, with the trace
        status = "failed"
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"
    try:
        store.finish_run(run_id, status, error)
    except StoreWriteFailed as exc:  # the disk filled up under it: say what could not be kept
        raise StoreWriteFailed(
            f"{exc}; run {run_id} stopped ({first_line(error or status)}) but could not be "
            "stored so, and will read 'interrupted': free some space"
        ) from exc
    yield RunFinished(run_id, status, error)


def _locked_error(store: Store, run_id: int, result: object, n: int, exc: StoreLocked) -> str:
    """The reason a run stops when another writer kept the lock past the retries; the point
    just measured (at ``n`` on its axis) is stored if the lock frees within the store's final
    patience."""
    try:
        store.add_point(run_id, result, patient=True, seq_len=n)
        kept = f"the point at N={n} was stored once the lock was free"
    except StoreError:
        kept = f"the point measured at N={n} could not be stored"
    return f"stopped at N={n}: {exc} ({kept}; the points before it are kept)"
