"""Ladder jobs: a ladder's steps (:mod:`workbench.ladder`) on one problem, lengths and backend,
one run per step in one group, all on the same inputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from workbench.config import ConfigError, Problem, SweepSpec
from workbench.events import Event, LadderStarted
from workbench.jobs.base import (
    Plan,
    Timing,
    backend_for,
    finishing,
    job_names,
    point_work,
    prepend,
    timing_for,
)
from workbench.store import Store

# The fields a ladder job is given (its problem, lengths and backend): a refusal naming one of
# them is about the input; any other field is a step's own knob, from the ladder's preset.
GIVEN_FIELDS = frozenset(f.name for f in dataclasses.fields(Problem)) | {
    "seq_lens",
    "backend",
    "backends",
}

# A ladder's problem when not given: a size a GPU measures in minutes, the reference in seconds.
LADDER_DEFAULTS = {
    "reference": {"seq_lens": "128,256", "batch": 1, "heads": 2, "head_dim": 64},
    "gpu": {"seq_lens": "1k-16k", "batch": 4, "heads": 32, "head_dim": 128},
}


def ladder_defaults(backend: str) -> dict[str, Any]:
    return LADDER_DEFAULTS["reference" if backend == "reference" else "gpu"]


class LadderStepError(ConfigError):
    """A ladder step's own knob (from the preset, not the input) that the backend or the
    problem refuses: the ladder cannot run as set, whatever the input."""


@dataclass(frozen=True)
class LadderJob:
    """A ladder to run: its steps, and the problem, lengths and backend every step shares."""

    ladder: Any  # workbench.ladder.Ladder
    problem: Problem
    seq_lens: tuple[int, ...]
    backend: str
    label: str = ""
    seed: int | None = None
    kind: ClassVar[str] = "ladder"

    @property
    def backends(self) -> tuple[str, ...]:
        return (self.backend,)

    def planned_lengths(self) -> tuple[int, ...]:
        return tuple(self.seq_lens) * len(self.ladder.steps)

    def preflight(self) -> Plan:
        """The backend and every step on every length, before the group is written. A step's
        knob that cannot run is a :class:`LadderStepError` naming the step."""
        from workbench.ladder import step_label
        from workbench.runner import check_points

        backend = backend_for(self.backend)  # asks whether it is available
        for step in self.ladder.steps:
            spec = SweepSpec(
                self.problem, self.seq_lens, step.config, self.backend, step_label("", step)
            )
            try:
                check_points(spec, backend)
            except ConfigError as exc:
                if exc.field in GIVEN_FIELDS:
                    raise
                raise LadderStepError(
                    exc.field, exc.value, f"{exc.allowed} (in ladder step {step.name!r})"
                ) from exc
        return Plan((backend,), self.planned_lengths())

    def run(
        self,
        store: Store,
        *,
        plan: Plan | None = None,
        timing: Timing = None,
        cancel: Callable[[], bool] | None = None,
    ) -> Iterator[Event]:
        from workbench.ladder import run_ladder

        plan = plan or self.preflight()
        (backend,) = plan.backends
        group_id, events = run_ladder(
            self.ladder,
            self.problem,
            self.seq_lens,
            self.backend,
            store,
            label=self.label,
            timing=timing_for(timing, backend),
            cancel=cancel,
            seed=self.seed,
            backend=backend,
            checked=True,
        )
        started = LadderStarted(
            plan.total,
            plan.lengths,
            group_id=group_id,
            backends=self.backends,
            steps=tuple(step.name for step in self.ladder.steps),
            works=tuple(
                point_work(self.problem, step.config, n)
                for step in self.ladder.steps
                for n in self.seq_lens
            ),
            min_samples=timing_for(timing, backend).min_samples,
        )
        return finishing(prepend((started,), events), cancel)


def ladder_job(
    spec: SweepSpec, backends: Sequence[str], label: str = "", ladder: Any = None
) -> LadderJob:
    """The ladder (the built-in one for this machine unless given) on a sweep's problem,
    lengths and one backend, under ``label`` (the sweep's own label names a sweep, not it).

    The ladder's steps bring their own mask, so the sweep's input offset (``input_pos``) goes
    with them only when the sweep is causal: the offset belongs to "causal with offset", not
    to a sliding window or no mask."""
    names = job_names(backends) or [spec.backend]
    if len(names) != 1:
        raise ConfigError("backends", names, "the ladder runs on one backend at a time")
    if ladder is None:
        from workbench.ladder import load_ladder

        ladder = load_ladder()
    problem = spec.problem
    if problem.input_pos and spec.config.mask != "causal":
        problem = dataclasses.replace(problem, input_pos=0, k_len=problem.q_len)
    return LadderJob(ladder, problem, tuple(spec.seq_lens), names[0], label, spec.seed)
