"""A running job's progress, Qt-free: the window renders it, the CLI prints it.

:class:`ProgressModel` is fed every event of a job's stream (:mod:`workbench.run.events`) and keeps
what a front end shows: points done of the total, time elapsed and left (:class:`TimeLeft`), one
line of text for a progress label, a note for a status line when something notable happens, and
at the end one :class:`Outcome` (a line, and a line per failed run). :class:`ProgressPrinter` is
the command line's view of the same model: a line per point on stderr.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.config import AXIS_LABELS
from workbench.run.events import (
    CANCELLED,
    JobFinished,
    JobStarted,
    PointFinished,
    PointStarted,
    RunFinished,
    RunStarted,
    Skipped,
    StepStarted,
)
from workbench.run.stories import JobStory, Outcome, SweepStory, first_line

# Launch-equivalents a point costs besides its timed samples: the first (compiling) launch,
# the warm-up launches (3 by default) and the correctness check against a reference.
EXTRA_LAUNCHES = 5
# The fewest timed samples a point takes when the job does not say (TimingSettings' default).
DEFAULT_MIN_SAMPLES = 10


@dataclass(frozen=True)
class DonePoint:
    work: float  # FLOPs
    wall_s: float  # how long the point took, start to end
    latency_s: float  # one launch (the point's median), 0 when unknown
    samples: int  # timed samples (0 when unknown)


def estimate_point_s(work: float, done: Sequence[DonePoint], min_samples: int) -> float:
    """How long a point of ``work`` FLOPs will take, from the points done so far.

    A point times ``max(min_samples, what fills the timing window)`` launches, plus a few more
    (compile, warm-up, the check), plus a fixed cost (a process, a transfer). One launch takes
    the backend's time per FLOP, as its latest point showed, times the work: so a 4k point after
    a 512 one is 64 times the launch, not the mean of the points before (30-50x short before).
    """
    last = done[-1]
    if last.latency_s <= 0 or last.samples <= 0 or last.work <= 0:
        # Nothing known of the launches: the time scales with the work.
        return last.wall_s * work / last.work if last.work > 0 else last.wall_s
    per_flop = last.latency_s / last.work
    launch = per_flop * work
    # The timing window: what the points that sampled past min_samples spent timing.
    windows = [p.samples * p.latency_s for p in done if p.samples > min_samples]
    window = min(windows) if windows else 0.0
    fixed = min(
        max(p.wall_s - (p.samples + EXTRA_LAUNCHES) * p.latency_s, 0.0)
        for p in done
        if p.samples > 0
    )
    return max(window, min_samples * launch) + EXTRA_LAUNCHES * launch + fixed


class TimeLeft:
    """Estimates the time left in a job: each remaining point from its work (FLOPs) and what
    the backend has shown per FLOP (:func:`estimate_point_s`). The CLI and the window both
    read it through :class:`ProgressModel`.

    ``works`` gives each planned point's work; without it a point's work is taken as N².
    """

    def __init__(
        self,
        seq_lens: Sequence[int],
        works: Sequence[float] = (),
        min_samples: int = 0,
    ) -> None:
        self._works = (
            list(works) if len(works) == len(seq_lens) else [float(n) ** 2 for n in seq_lens]
        )
        self._min_samples = min_samples or DEFAULT_MIN_SAMPLES
        self._done: list[DonePoint] = []

    def add(
        self, seq_len: int, elapsed_s: float, *, latency_s: float = 0.0, samples: int = 0
    ) -> None:
        """Point number ``len(done)`` finished after ``elapsed_s``; ``latency_s`` and
        ``samples`` are its median launch and timed samples (0: unknown)."""
        index = len(self._done)
        work = self._works[index] if index < len(self._works) else float(seq_len) ** 2
        self._done.append(DonePoint(work, max(float(elapsed_s), 0.0), latency_s, samples))

    def seconds_left(self) -> float | None:
        """None before the first point finishes (nothing to go on)."""
        if not self._done:
            return None
        remaining = self._works[len(self._done) :]
        return sum(estimate_point_s(w, self._done, self._min_samples) for w in remaining)

    def next_point_s(self) -> float | None:
        """The estimate for the next point to finish (the one under way), None without one."""
        index = len(self._done)
        if not self._done or index >= len(self._works):
            return None
        return estimate_point_s(self._works[index], self._done, self._min_samples)


def format_duration(seconds: float) -> str:
    """``"4 s"``, ``"2 min 05 s"``, ``"1 h 03 min"``: what a progress line needs."""
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class ProgressModel:
    """What a job has done and has left, from its events. ``story`` (how the job reads) and
    ``lengths`` are the job's before it starts (:meth:`for_job`); its JobStarted replaces the
    lengths with the checked plan. Durations are read from ``clock`` as the events arrive."""

    def __init__(
        self,
        story: JobStory | None = None,
        lengths: Sequence[int] = (),
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.story = story or SweepStory()
        self.total = len(lengths)
        self.done = 0
        self.text = "Starting…"
        self.group_id: int | None = None
        self.run_ids: tuple[int, ...] = ()
        self.steps: tuple[str, ...] = ()
        self.step: tuple[int, int, str] | None = None  # the ladder step under way
        self.skipped: list[Skipped] = []
        self.ended: dict[int, tuple[str, str]] = {}  # run id: (status, error), as they end
        self.last_run_id: int | None = None
        self.finished: JobFinished | None = None
        self._started = False
        self._cancelling = False
        self._run_steps: dict[int, tuple[int, int, str]] = {}
        self._points: dict[int, int] = {}  # run id: points finished
        self._time_left = TimeLeft(lengths)
        self._point_line = ""  # the point under way, without its time left
        self._point_start_s = 0.0
        self._clock = clock
        self._start_s = self._last_s = clock()

    @classmethod
    def for_job(cls, job: Any, **kwargs: Any) -> ProgressModel:
        return cls(job.story, job.planned_lengths(), **kwargs)

    # ---- reading --------------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """The job's runs or group are stored (it got past its preflight)."""
        return self._started

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._start_s

    @property
    def seconds_left(self) -> float | None:
        return self._time_left.seconds_left()

    @property
    def seconds_left_now(self) -> float | None:
        """The time left as of now: while a point is under way, its time so far is taken off
        (a long point counted down instead of saying the same for minutes); once it runs past
        its estimate, what the points after it take is left."""
        left = self.seconds_left
        if left is None or not self._point_line:
            return left
        spent = self._clock() - self._point_start_s
        current = self._time_left.next_point_s() or 0.0
        return max(left - spent, left - current, 0.0)

    def live_text(self) -> str:
        """:attr:`text`, its time left counted down while a point is under way (a front end
        asks every second or so)."""
        if not self._point_line or self._cancelling:
            return self.text
        left = self.seconds_left_now
        eta = "" if left is None else f" · about {format_duration(left)} left"
        return f"{self._point_line}{eta}"

    def points_of(self, run_id: int) -> int:
        return self._points.get(run_id, 0)

    def step_of(self, run_id: int) -> tuple[int, int, str] | None:
        """The ladder step (index, total, name) a run measured, if it was a step's."""
        return self._run_steps.get(run_id)

    def _eta(self, *, zero: bool = True) -> str:
        left = self.seconds_left
        if left is None or (not zero and not left):
            return ""
        return f" · about {format_duration(left)} left"

    def _prefix(self) -> str:
        return self.story.prefix(self)

    def group_line(self) -> str:
        line = f"Group #{self.group_id}: {len(self.run_ids)} runs, {self.total} points"
        skips: dict[str, list[int]] = {}
        for skip in self.skipped:
            skips.setdefault(skip.backend, []).append(skip.seq_len)
        if skips:
            notes = [
                f"{backend} skips N = {', '.join(f'{n:,}' for n in lengths)}"
                for backend, lengths in skips.items()
            ]
            line += f" ({'; '.join(notes)}: too large for it)"
        return line

    # ---- feeding --------------------------------------------------------------------------------
    def update(self, event: Any) -> str | None:
        """Take one event; returns a note worth a status line, or None."""
        text = self.text
        try:
            return self._update(event)
        finally:
            if self._cancelling:
                self.text = text

    def _update(self, event: Any) -> str | None:
        if isinstance(event, JobStarted):
            return self._job_started(event)
        if isinstance(event, Skipped):
            self.skipped.append(event)
            return self.story.skip_note(self)
        if isinstance(event, StepStarted):
            self.step = (event.index, event.total, event.name)
            self.text = f"{self._prefix()}starting…"
        elif isinstance(event, RunStarted):
            self.last_run_id = event.run_id
            if self.step is not None:
                self._run_steps[event.run_id] = self.step
        elif isinstance(event, PointStarted):
            self._point_line = (
                f"{self._prefix()}Run #{event.run_id}: point {event.index + 1}/{event.total}, "
                f"N = {event.seq_len:,}"
            )
            self._point_start_s = self._clock()
            self.text = f"{self._point_line}{self._eta()}"
        elif isinstance(event, PointFinished):
            self._point_line = ""
            now = self._clock()
            self._time_left.add(
                event.point.seq_len,
                now - self._last_s,
                latency_s=event.point.latency_ms / 1e3,
                samples=event.point.samples,
            )
            self._last_s = now
            self.done += 1
            self._points[event.run_id] = self._points.get(event.run_id, 0) + 1
            self.text = (
                f"{self._prefix()}Run #{event.run_id}: {event.index + 1}/{event.total} done, "
                f"N = {event.point.seq_len:,} took {event.point.latency_ms:.3g} ms"
                f"{self._eta(zero=False)}"
            )
        elif isinstance(event, RunFinished):
            return self._run_finished(event)
        elif isinstance(event, JobFinished):
            self.finished = event
        return None

    def _job_started(self, event: JobStarted) -> str | None:
        self._started = True
        self.total = event.total
        self._time_left = TimeLeft(event.lengths, event.works, event.min_samples)
        self._last_s = self._clock()
        self.group_id, self.run_ids = event.group_id, tuple(event.run_ids)
        self.steps = self.story.steps_of(event)
        return self.story.started_note(self, event)

    def _run_finished(self, event: RunFinished) -> str | None:
        self.ended[event.run_id] = (event.status, event.error or "")
        return self.story.run_note(self, event)

    def cancelling(self) -> None:
        """The user asked the job to stop: the text says so from now on."""
        self._cancelling = True
        self.text = "Cancelling…"

    # ---- the end --------------------------------------------------------------------------------
    def outcome(self, cancelled: bool = False) -> Outcome | None:
        """How the job ended; None when it never started (refused: its error said why).
        ``cancelled``: the user asked it to stop (else an unfinished job merely stopped)."""
        if not self._started:
            return None
        if self.finished is not None:
            status = self.finished.status
        else:
            status = CANCELLED if cancelled else "stopped"
        how = CANCELLED if cancelled or status == CANCELLED else "stopped"
        return self.story.outcome(self, status, how)


class ProgressPrinter:
    """The command line's view of a job: its events as lines on ``write`` (stderr by default),
    a line per point with the model's time left; in a group a line per length with every
    backend's result, since the backends of a length are timed together."""

    def __init__(
        self,
        story: JobStory | None = None,
        write: Callable[[str], Any] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = ProgressModel(story, clock=clock)
        self._write = write or _stderr
        self._backend_of: dict[int, str] = {}  # run id: backend, inside a group
        self._pending = False  # a group length's line is open
        self._x = "N"  # the job's axis as a point's lengths are named: N, or k_len in decode
        self._open = False  # a point's line waits for its result

    def say(self, text: str, end: str = "\n", *, continues: bool = False) -> None:
        """``text`` on a line of its own, unless it ``continues`` the open point line."""
        if self._open and not continues:
            text = "\n" + text
        self._open = end == ""
        self._write(text + end)

    def __call__(self, event: Any) -> None:
        self.model.update(event)
        story = self.model.story
        if isinstance(event, JobStarted):
            self._x = AXIS_LABELS.get(event.axis, "N")
            if story.times_backends_together:
                self._backend_of = dict(zip(event.run_ids, event.backends))
            line = story.started_line(event)
            if line is not None:
                self.say(line)
        elif isinstance(event, Skipped):
            self.say(f"note: {event.backend} skips {self._x}={event.seq_len}: {event.reason}")
        elif isinstance(event, StepStarted):
            summary = event.config.summary()
            self.say(f"step {event.index + 1}/{event.total}: {event.name} ({summary})")
        elif isinstance(event, RunStarted) and not self._backend_of:
            self.say(f"run {event.run_id}: {event.total} point(s)")
        elif isinstance(event, PointStarted):
            if not self._backend_of:
                self.say(f"  [{event.index + 1}/{event.total}] {self._x}={event.seq_len} …", end="")
            elif not self._pending:
                self._pending = True
                self.say(f"  {self._x}={event.seq_len} …")
        elif isinstance(event, PointFinished):
            self._point_finished(event)
        elif isinstance(event, RunFinished):
            tail = f": {first_line(event.error)}" if event.error else ""
            self.say(f"run {event.run_id} {event.status}{tail}")
        elif isinstance(event, JobFinished) and story.announces_its_end:
            outcome = self.model.outcome()
            if outcome is not None:
                self.say(outcome.line)

    def _point_finished(self, event: PointFinished) -> None:
        p = event.point
        rel = "-" if p.rel_err is None else f"{p.rel_err:.1e}"
        result = f"{p.latency_ms:.3f} ms, {p.tflops:.3f} TFLOP/s, rel err {rel}"
        if self._backend_of:
            self._pending = False
            self.say(f"    {self._backend_of[event.run_id]:12} {result}")
            return
        left = self.model.seconds_left
        tail = f" (about {format_duration(left)} left)" if left else ""
        self.say(f" {result}{tail}", continues=True)


_line_open = False  # stderr's last progress text did not end its line


def _stderr(text: str) -> None:
    global _line_open
    if text:  # before the write: a Ctrl-C landing just after it must still see the line open
        _line_open = not text.endswith("\n")
    sys.stderr.write(text)
    sys.stderr.flush()


def end_open_line() -> None:
    """End a progress line left waiting for its result, so what is said next (terminated, an
    error) starts a line of its own."""
    if _line_open:
        _stderr("\n")
