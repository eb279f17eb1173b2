"""What a job says while it runs: plain frozen dataclasses, picklable, so they cross the engine's
pipe from a child process unchanged.

Every job (:mod:`workbench.jobs`) streams the same vocabulary, and the CLI and the window read it
the same way (:mod:`workbench.run.progress`):

- a :class:`JobStarted` first (a :class:`SweepStarted`, :class:`GroupStarted` or
  :class:`LadderStarted`): its runs or its group are stored, and it says what it will measure;
- :class:`Skipped` for a length one backend of a group cannot run (it is left out for that
  backend alone);
- per run: :class:`RunStarted`, then :class:`PointStarted` and :class:`PointFinished` for each
  point, then :class:`RunFinished` with the run's status (complete, failed or cancelled);
  a ladder puts a :class:`StepStarted` before each step's run;
- a :class:`JobFinished` last, with the job's status (complete, failed or cancelled).

A refusal (a bad value, a backend that cannot run) is not an event: the job raises it before
anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from workbench.store import PointRecord

COMPLETE, FAILED, CANCELLED = "complete", "failed", "cancelled"


@dataclass(frozen=True)
class JobStarted:
    """The job's runs (or its group) are stored; the rest of the stream measures them."""

    total: int  # points the job will measure, over all its runs
    lengths: tuple[int, ...]  # the sequence length of each of those points, in measuring order
    run_ids: tuple[int, ...] = ()  # the runs stored up front (a ladder stores one per step later)
    group_id: int | None = None
    backends: tuple[str, ...] = ()
    axis: str = "seq_len"  # what the lengths are: N ("seq_len") or k_len (a decode sweep)
    # Each of those points' work (its FLOPs: 4·B·H·Nq·Nk·D, halved for causal), for the time
    # left (:class:`workbench.run.progress.TimeLeft`); () where a job does not say.
    works: tuple[float, ...] = ()
    min_samples: int = 0  # the fewest timed samples a point takes (0: not said)
    kind: ClassVar[str] = ""  # the job's: "sweep", "group" or "ladder"

    @property
    def planned_runs(self) -> int:
        """How many runs the job means to store and finish."""
        return len(self.run_ids)


@dataclass(frozen=True)
class SweepStarted(JobStarted):
    """One run on one backend."""

    kind: ClassVar[str] = "sweep"


@dataclass(frozen=True)
class GroupStarted(JobStarted):
    """One run per backend, in one group, timed interleaved at each length."""

    kind: ClassVar[str] = "group"


@dataclass(frozen=True)
class LadderStarted(JobStarted):
    """One run per ladder step, in one group; each step's run is stored when the step starts."""

    steps: tuple[str, ...] = ()  # the step names, in order
    kind: ClassVar[str] = "ladder"

    @property
    def planned_runs(self) -> int:
        return len(self.steps)


@dataclass(frozen=True)
class Skipped:
    """A length one backend of a group cannot run (naive attention's N×N scores)."""

    backend: str
    seq_len: int
    reason: str


@dataclass(frozen=True)
class StepStarted:
    """A ladder step begins; its run's events follow."""

    index: int
    total: int
    name: str
    config: Any  # workbench.config.KernelConfig


@dataclass(frozen=True)
class RunStarted:
    run_id: int
    total: int


@dataclass(frozen=True)
class PointStarted:
    run_id: int
    index: int
    total: int
    seq_len: int


@dataclass(frozen=True)
class PointFinished:
    run_id: int
    index: int
    total: int
    point: PointRecord
    elapsed_s: float  # since the run started


@dataclass(frozen=True)
class RunFinished:
    run_id: int
    status: str  # complete, failed or cancelled
    error: str | None = None


@dataclass(frozen=True)
class JobFinished:
    """The job is over: ``status`` is cancelled if it was cancelled, else failed if a run
    failed, else complete; ``runs`` is every run's (id, status, error), in the order they
    ended."""

    status: str
    runs: tuple[tuple[int, str, str | None], ...] = ()


RunEvent = RunStarted | PointStarted | PointFinished | RunFinished
Event = JobStarted | Skipped | StepStarted | RunEvent | JobFinished


def job_status(statuses: list[str], cancelled: bool) -> str:
    """A job's status from its runs' statuses: cancelled beats failed beats complete."""
    if cancelled or CANCELLED in statuses:
        return CANCELLED
    if FAILED in statuses:
        return FAILED
    return COMPLETE
