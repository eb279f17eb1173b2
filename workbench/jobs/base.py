"""What every job shares: the :class:`Job` base, its plan, preflight checks and event plumbing.

A job is a frozen, picklable description of work (so it can be sent to a child process) with:

- ``kind`` (``"sweep"``, ``"group"``, ``"ladder"``: a name for people and logs; no front end
  switches on it) and ``backends``, the names it computes on;
- ``story`` (:mod:`workbench.run.stories`): everything a front end asks of it, its title, progress
  text, notes, failure wording and what the window selects and follows; a new kind of job is a
  new class with its own story;
- ``planned_lengths()``: the sequence length of every point it means to measure, in order,
  before anything is checked (what a progress bar shows until the job starts);
- ``preflight()``: every check that can be made before anything is written; a bad input raises
  one :class:`~workbench.config.ConfigError` naming its field. Returns a :class:`Plan`;
- ``run(store, *, plan=None, timing=None, cancel=None)``: preflight (unless given its plan),
  store the job's runs, and return the stream of :mod:`workbench.run.events` it measures them with.
  ``cancel`` is asked between points; the stream always ends with a JobFinished.

:class:`Job` writes ``run`` once (plan, measure, finish); each kind writes ``preflight`` and
``measure``, the events of its runs after the plan was checked.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from workbench.backends import Backend, BackendError, UnknownBackend, get_backend
from workbench.config import ConfigError, SweepSpec
from workbench.measure.timing import TimingSettings
from workbench.run.events import (
    CANCELLED,
    Event,
    JobFinished,
    JobStarted,
    RunFinished,
    Skipped,
    job_status,
)
from workbench.run.stories import JobStory
from workbench.store import Store

# One timing for every backend, one per backend name, or None: each backend's own.
Timing = TimingSettings | Mapping[str, TimingSettings] | None


class BackendRefused(ConfigError):
    """A backend that cannot run here (unknown, or not available on this machine). It names the
    ``backends`` field (the one a form marks), and its text is the reason alone."""

    def __str__(self) -> str:
        return self.allowed


def backend_for(name: str) -> Backend:
    """The backend called ``name``, ready to run, or a :class:`BackendRefused` saying why not."""
    try:
        backend = get_backend(name)
    except UnknownBackend as exc:
        raise BackendRefused("backends", name, str(exc)) from None
    status = backend.availability()
    if not status.available:
        raise BackendRefused(
            "backends", name, f"backend {name!r} is not available: {status.reason}"
        )
    return backend


class BackendUnavailable(BackendError):
    pass


def check_available(spec: SweepSpec, backend: Backend) -> None:
    status = backend.availability()
    if not status.available:
        raise BackendUnavailable(f"backend {spec.backend!r} is not available: {status.reason}")


def check_points(spec: SweepSpec, backend: Backend) -> None:
    """The backend's refusals of ``spec``'s points, for a caller that already knows it is
    available (asking again probes the GPU again)."""
    for problem in spec.problems():
        backend.check_supported(problem, spec.config)


def point_work(problem: Any, config: Any, seq_len: int, axis: str = "seq_len") -> float:
    """The work of one point at ``seq_len`` on ``axis`` (N, or a decode sweep's k_len): its
    FLOPs as TFLOP/s counts them (4·B·H·Nq·Nk·D, halved for causal), what the time left is
    estimated from."""
    from workbench.backends.base import problem_flops

    return float(problem_flops(problem.at(axis, seq_len), config))


def timing_for(timing: Timing, backend: Backend) -> TimingSettings:
    if isinstance(timing, TimingSettings):
        return timing
    if timing is not None and backend.name in timing:
        return timing[backend.name]
    return backend.default_timing()


def computes_in_process(backend: str) -> bool:
    """Does a job on this backend compute in the calling process? The GPU backends compute in
    the supervised engine's child (:mod:`workbench.backends.isolated`); the others (the NumPy
    reference) where they are called."""
    from workbench.backends import runs_in_engine

    return not runs_in_engine(backend)


@dataclass(frozen=True)
class Plan:
    """A job checked and ready to run; nothing is written yet."""

    backends: tuple[Backend, ...]
    lengths: tuple[int, ...]  # one per point, in the order they are measured
    skipped: tuple[Skipped, ...] = ()
    detail: Any = None  # the job's own plan (a group's GroupPlan)

    @property
    def total(self) -> int:
        return len(self.lengths)


class Ending:
    """What a job's stream has said about its runs, for the JobFinished that ends it."""

    def __init__(self) -> None:
        self.started: JobStarted | None = None
        self.runs: list[tuple[int, str, str | None]] = []

    def see(self, event: Event) -> None:
        if isinstance(event, JobStarted):
            self.started = event
        elif isinstance(event, RunFinished):
            self.runs.append((event.run_id, event.status, event.error))

    def finished(self, cancel_requested: bool) -> JobFinished:
        """Cancelled when a run was, or when a cancel left runs of the plan unrun."""
        statuses = [status for _, status, _ in self.runs]
        planned = self.started.planned_runs if self.started is not None else 0
        cancelled = CANCELLED in statuses or (cancel_requested and len(self.runs) < planned)
        return JobFinished(job_status(statuses, cancelled), tuple(self.runs))


def finishing(events: Iterator[Event], cancel: Callable[[], bool] | None) -> Iterator[Event]:
    """``events``, then the JobFinished they add up to. Closing this closes ``events`` (a
    runner then stores its run as cancelled)."""
    ending = Ending()
    try:
        for event in events:
            ending.see(event)
            yield event
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    yield ending.finished(bool(cancel is not None and cancel()))


class Job(ABC):
    """What every kind of job shares: ``run`` is plan, measure, finish; a kind writes its
    ``preflight`` and its ``measure``."""

    kind: ClassVar[str]
    story: ClassVar[JobStory]  # how it reads: its name, failure wording, outcome line
    if TYPE_CHECKING:  # a field or a property of each kind

        @property
        def backends(self) -> tuple[str, ...]: ...  # the backend names it computes on

    @abstractmethod
    def planned_lengths(self) -> tuple[int, ...]: ...

    @abstractmethod
    def preflight(self) -> Plan: ...

    @abstractmethod
    def measure(
        self, store: Store, plan: Plan, timing: Timing, cancel: Callable[[], bool] | None
    ) -> Iterator[Event]:
        """The job's events once ``plan`` is checked: its started event first (the runs or the
        group are stored by then), its runs' events after."""

    def run(
        self,
        store: Store,
        *,
        plan: Plan | None = None,
        timing: Timing = None,
        cancel: Callable[[], bool] | None = None,
    ) -> Iterator[Event]:
        """Preflight (unless ``plan`` is this job's plan: raising before anything is written),
        then the job's events, ending with the JobFinished they add up to."""
        return finishing(self.measure(store, plan or self.preflight(), timing, cancel), cancel)


def prepend(head: Sequence[Event], tail: Iterator[Event]) -> Iterator[Event]:
    try:
        yield from head
        yield from tail
    finally:
        close = getattr(tail, "close", None)
        if close is not None:
            close()


def job_names(backends: Sequence[str]) -> list[str]:
    return [name.strip() for name in backends if name.strip()]
