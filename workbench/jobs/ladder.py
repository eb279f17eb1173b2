"""Ladder jobs: a ladder's steps (:mod:`workbench.jobs.ladder_steps`) on one problem, lengths and
backend, one run per step in one group, all on the same inputs."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from workbench.backends import Backend, get_backend
from workbench.backends.plugin_env import knob_values_set
from workbench.config import K_LEN_AXIS, SEQ_LEN_AXIS, ConfigError, Problem, SweepSpec
from workbench.jobs.base import (
    Job,
    Plan,
    Timing,
    backend_for,
    check_available,
    check_points,
    job_names,
    point_work,
    prepend,
    timing_for,
)
from workbench.jobs.ladder_steps import GROUP_KIND as LADDER_GROUP_KIND
from workbench.jobs.ladder_steps import Ladder, load_ladder, step_label
from workbench.jobs.sweep import run_sweep
from workbench.measure.timing import TimingSettings
from workbench.run.events import Event, LadderStarted, RunEvent, StepStarted
from workbench.run.stories import JobStory, LadderStory
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
    # A decode ladder's key lengths and a GQA problem (Llama-3-8B's 32/8 heads on a GPU).
    "decode-reference": {"seq_lens": "256,512", "batch": 1, "heads": 4, "kv_heads": 1,
                         "head_dim": 64},
    "decode-gpu": {"seq_lens": "4k-32k", "batch": 8, "heads": 32, "kv_heads": 8,
                   "head_dim": 128},
}  # fmt: skip


def ladder_defaults(backend: str, *, decode: bool = False) -> dict[str, Any]:
    where = "reference" if computes_on_the_host(backend) else "gpu"
    return LADDER_DEFAULTS[f"decode-{where}" if decode else where]


def computes_on_the_host(backend: str) -> bool:
    """Its declaration says it computes on the CPU (the reference, a plugin given host
    arrays): a GPU's default sizes would take it hours (the numpy example: about 22 h)."""
    from workbench.backends import catalog

    return backend in catalog.backend_names() and catalog.declaration_of(backend).on_host


class LadderStepError(ConfigError):
    """A ladder step's own knob (from the preset, not the input) that the backend or the
    problem refuses: the ladder cannot run as set, whatever the input."""

    refuses_a_step: ClassVar[bool] = True  # what LadderStory.refusal asks


@dataclass(frozen=True)
class LadderJob(Job):
    """A ladder to run: its steps, and the problem, lengths and backend every step shares."""

    ladder: Any  # workbench.jobs.ladder_steps.Ladder
    problem: Problem
    seq_lens: tuple[int, ...]
    backend: str
    label: str = ""
    seed: int | None = None
    axis: str = SEQ_LEN_AXIS  # the lengths are N, or k_len at the problem's q_len (decode)
    kind: ClassVar[str] = "ladder"
    story: ClassVar[JobStory] = LadderStory()

    @property
    def backends(self) -> tuple[str, ...]:
        return (self.backend,)

    def planned_lengths(self) -> tuple[int, ...]:
        return tuple(self.seq_lens) * len(self.ladder.steps)

    def preflight(self) -> Plan:
        """The backend and every step on every length, before the group is written. A step's
        knob that cannot run is a :class:`LadderStepError` naming the step."""
        backend = backend_for(self.backend)  # asks whether it is available
        for step in self.ladder.steps:
            spec = SweepSpec(
                self.problem,
                self.seq_lens,
                step.config,
                self.backend,
                step_label("", step),
                axis=self.axis,
            )
            try:
                check_step(step, spec, backend)
            except ConfigError as exc:
                if exc.field in GIVEN_FIELDS:
                    raise
                raise LadderStepError(
                    exc.field, exc.value, f"{exc.allowed} (in ladder step {step.name!r})"
                ) from exc
        return Plan((backend,), self.planned_lengths())

    def measure(
        self, store: Store, plan: Plan, timing: Timing, cancel: Callable[[], bool] | None
    ) -> Iterator[Event]:
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
            axis=self.axis,
        )
        started = LadderStarted(
            plan.total,
            plan.lengths,
            group_id=group_id,
            backends=self.backends,
            axis=self.axis,
            steps=tuple(step.name for step in self.ladder.steps),
            works=tuple(
                point_work(self.problem, step.config, n, self.axis)
                for step in self.ladder.steps
                for n in self.seq_lens
            ),
            min_samples=timing_for(timing, backend).min_samples,
        )
        return prepend((started,), events)


def run_ladder(
    ladder: Ladder,
    problem: Problem,
    seq_lens: tuple[int, ...],
    backend_name: str,
    store: Store,
    *,
    label: str = "",
    timing: TimingSettings | None = None,
    cancel: Callable[[], bool] | None = None,
    seed: int | None = None,
    backend: Backend | None = None,
    checked: bool = False,
    axis: str = SEQ_LEN_AXIS,
) -> tuple[int, Iterator[StepStarted | RunEvent]]:
    """Check every step (unless ``checked``: a job's preflight did), store the group, and
    return (group id, events of all steps)."""
    seed = secrets.randbits(32) if seed is None else seed
    backend = backend or get_backend(backend_name)
    specs = [
        SweepSpec(
            problem, seq_lens, step.config, backend_name, step_label(label, step), seed, axis=axis
        )
        for step in ladder.steps
    ]
    if not checked:
        check_available(specs[0], backend)
        for step, spec in zip(ladder.steps, specs):
            check_step(step, spec, backend)
    group_id = store.create_group(
        LADDER_GROUP_KIND,
        label or f"{ladder.name} on {backend_name}",
        {
            "steps": [s.name for s in ladder.steps],
            # Each step's knobs, so a view can name a step that never ran (cancelled, failed).
            "configs": [s.summary() for s in ladder.steps],
            "published": ladder.published,
            # Which preset ran, so the view can say so (a Hopper ladder is not Blackwell's).
            "preset": ladder.preset,
            "ladder": ladder.name,
            "archs": list(ladder.archs),
        },
    )

    def events() -> Iterator[StepStarted | RunEvent]:
        for index, (step, spec) in enumerate(zip(ladder.steps, specs)):
            if cancel is not None and cancel():
                return
            yield StepStarted(index, len(specs), step.name, step.config)
            with knob_values_set(step.plugin_knobs):  # the step's run records them
                yield from run_sweep(
                    spec,
                    store,
                    timing=timing,
                    backend=backend,
                    cancel=cancel,
                    group_id=group_id,
                    step=step.name,
                    checked=True,  # every step was checked before the group was stored
                )

    return group_id, events()


def check_step(step: Any, spec: SweepSpec, backend: Backend) -> None:
    """Every point of ``step`` checked as it will run: its plugin knobs set, and on that plugin
    only (a LadderStepError naming the step and the knob on another backend)."""
    if step.plugin_knobs and step.plugin != spec.backend:
        first = next(iter(step.plugin_knobs))
        raise LadderStepError(
            "steps", f"{step.name}: {first}",
            f"a knob of this ladder's backend; {first} is the plugin {step.plugin}'s, and the "
            f"ladder runs on {spec.backend} (--backend {step.plugin})",
        )  # fmt: skip
    with knob_values_set(step.plugin_knobs):
        check_points(spec, backend)


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
        ladder = load_ladder()
    if ladder.axis != spec.axis and ladder.axis == K_LEN_AXIS:
        raise ConfigError(
            "axis",
            spec.axis,
            f"the {ladder.name} sweeps k_len at a fixed q_len: set the lengths to k_len (or "
            "pick a decode preset)",
        )
    problem = spec.problem
    if problem.input_pos and spec.config.mask != "causal" and spec.axis == SEQ_LEN_AXIS:
        problem = dataclasses.replace(problem, input_pos=0, k_len=problem.q_len)
    return LadderJob(
        ladder, problem, tuple(spec.seq_lens), names[0], label, spec.seed, axis=spec.axis
    )
