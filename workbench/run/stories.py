"""How each kind of job reads to a person: its name, its failure wording, its progress notes,
how it ended, and what a window shows of it when it starts and ends.

Every job carries its story (:attr:`workbench.jobs.base.Job.story`); the progress model, the
command line and the window ask the story instead of switching on the job's name, so a new kind
of job is a new job class and a new story, and no front end changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from workbench.run.events import CANCELLED, COMPLETE, FAILED, JobStarted, LadderStarted, RunFinished


def first_line(text: str | None) -> str:
    return text.splitlines()[0] if text else ""


@dataclass(frozen=True)
class Outcome:
    """How a job ended, in words: ``line`` for a status line, ``failures`` one entry per run
    that failed (a sweep's with its whole error, a group's or ladder's with its first line)."""

    story: JobStory
    status: str  # complete, failed, cancelled, or stopped (by an error outside the runs)
    line: str
    failures: tuple[str, ...] = ()


class JobStory:
    """The words and the window's habits of one kind of job. ``model`` below is the job's
    :class:`workbench.run.progress.ProgressModel`."""

    noun: ClassVar[str] = "job"
    failure_title: ClassVar[str] = "Job failed"
    failure_kept: ClassVar[str] = "each run is kept with the points it measured"
    selects_its_runs: ClassVar[bool] = False  # the window selects all its runs as it starts
    follows_its_group: ClassVar[bool] = False  # the window's Ladder tab follows its group live
    announces_its_end: ClassVar[bool] = True  # the command line prints its outcome line
    # Its backends are timed together at each length: the command line prints a line per
    # length with every backend's result, not a line per point.
    times_backends_together: ClassVar[bool] = False

    @property
    def title(self) -> str:
        return self.noun.capitalize()

    def steps_of(self, event: JobStarted) -> tuple[str, ...]:
        """The names of the steps it runs, in order, from its started event (() if none)."""
        return ()

    def started_note(self, model: Any, event: JobStarted) -> str | None:
        """A status note as it starts (its runs or group stored)."""
        return None

    def started_line(self, event: JobStarted) -> str | None:
        """The command line's line as it starts, or None (its runs' own lines say it)."""
        return None

    def refusal(self, exc: Exception) -> str | None:
        """A dialog's text for a refusal the form cannot mark on a field (the job as set cannot
        run, whatever the input), or None: the form marks the field ``exc`` names."""
        return None

    def prefix(self, model: Any) -> str:
        """What starts each progress line (which step or group it is in)."""
        return ""

    def skip_note(self, model: Any) -> str | None:
        """A status note when a backend skips a length."""
        return None

    def run_note(self, model: Any, event: RunFinished) -> str | None:
        """A status note when one of its runs ends."""
        return None

    def outcome(self, model: Any, status: str, how: str) -> Outcome:
        raise NotImplementedError


class SweepStory(JobStory):
    noun = "sweep"
    failure_title = "Run failed"
    failure_kept = "it is kept in the history as failed with the points measured before the error"
    announces_its_end = False  # its run's own line says it

    def outcome(self, model: Any, status: str, how: str) -> Outcome:
        run_id = model.run_ids[0] if model.run_ids else model.last_run_id
        run_status, error = model.ended.get(run_id or -1, (status, ""))
        if run_status == FAILED:
            return Outcome(self, FAILED, f"Run #{run_id} failed", (error or "no error text",))
        if run_status == COMPLETE:
            return Outcome(self, COMPLETE, f"Run #{run_id} complete")
        points = model.points_of(run_id or -1)
        kept = "kept as cancelled" if run_status == CANCELLED else "kept as it is"
        return Outcome(
            self, run_status, f"Run #{run_id} {run_status} after {points} point(s); {kept}"
        )


class GroupStory(JobStory):
    noun = "group"
    failure_title = "Group run failed"
    selects_its_runs = True

    times_backends_together = True

    def prefix(self, model: Any) -> str:
        return f"Group #{model.group_id} · " if model.group_id is not None else ""

    def started_note(self, model: Any, event: JobStarted) -> str | None:
        return str(model.group_line())

    def started_line(self, event: JobStarted) -> str | None:
        runs = ", ".join(f"{b} #{r}" for b, r in zip(event.backends, event.run_ids))
        return f"group {event.group_id}: {runs}; {event.total} point(s), timed interleaved"

    def skip_note(self, model: Any) -> str | None:
        return model.group_line()

    def run_note(self, model: Any, event: RunFinished) -> str | None:
        return f"Group #{model.group_id}: run #{event.run_id} {event.status}"

    def outcome(self, model: Any, status: str, how: str) -> Outcome:
        failed = tuple(
            f"run #{rid} failed: {first_line(error) or 'no error text'}"
            for rid, (run_status, error) in sorted(model.ended.items())
            if run_status == FAILED
        )
        runs = len(model.run_ids)
        complete = sum(s == COMPLETE for s, _ in model.ended.values())
        head = f"Group #{model.group_id}"
        if failed:
            return Outcome(self, FAILED, f"{head}: {len(failed)} of {runs} runs failed", failed)
        if complete < runs:
            line = f"{head} {how}: {model.done} of {model.total} points, kept as they are"
            return Outcome(self, how, line)
        return Outcome(self, status, f"{head} complete: {runs} runs, {model.done} points")


class LadderStory(JobStory):
    noun = "ladder"
    failure_title = "Ladder step failed"
    follows_its_group = True

    def steps_of(self, event: JobStarted) -> tuple[str, ...]:
        return event.steps if isinstance(event, LadderStarted) else ()

    def started_note(self, model: Any, event: JobStarted) -> str | None:
        return f"Ladder #{event.group_id}: {len(self.steps_of(event))} steps"

    def started_line(self, event: JobStarted) -> str | None:
        return f"ladder group {event.group_id}: {len(self.steps_of(event))} steps"

    def refusal(self, exc: Exception) -> str | None:
        # A step's own knob (workbench.jobs.LadderStepError, a layer above) is no form field.
        if getattr(exc, "refuses_a_step", False):
            return f"The ladder cannot run as set:\n\n{exc}"
        return None

    def prefix(self, model: Any) -> str:
        if model.step is None:
            return ""
        index, total, name = model.step
        return f"Ladder step {index + 1}/{total} ({name}) · "

    def run_note(self, model: Any, event: RunFinished) -> str | None:
        step = model.step_of(event.run_id)
        if step is None:
            return None
        index, total, name = step
        return f"Ladder step {index + 1}/{total} ({name}): run #{event.run_id} {event.status}"

    def outcome(self, model: Any, status: str, how: str) -> Outcome:
        steps = len(model.steps)
        failed = []
        for run_id, (run_status, error) in model.ended.items():
            if run_status == FAILED:
                index, total, name = model.step_of(run_id) or (0, steps, "?")
                detail = f": {first_line(error)}" if error else ""
                failed.append(f"step {index + 1}/{total} {name} (run #{run_id}) failed{detail}")
        complete = sum(s == COMPLETE for s, _ in model.ended.values())
        head = f"Ladder #{model.group_id}"
        if failed:
            line = f"{head}: {len(failed)} of {steps} steps failed"
            return Outcome(self, FAILED, line, tuple(failed))
        if complete < steps:
            return Outcome(
                self, how, f"{head} {how} after {complete} of {steps} steps; kept as it is"
            )
        return Outcome(self, status, f"{head} complete: {steps} steps")
