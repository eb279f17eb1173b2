"""Jobs: what the CLI and the window run, with one preflight and one event stream each.

- :class:`SweepJob`: one sweep, one run (:mod:`workbench.jobs.sweep`, whose :func:`run_sweep` is
  the measuring loop every job is built on);
- :class:`GroupJob`: several backends on the same inputs, timed interleaved, one run each in one
  group (:mod:`workbench.jobs.group`);
- :class:`LadderJob`: a ladder's steps, one run each in one group (:mod:`workbench.jobs.ladder`).

Each has ``preflight()`` (every check, nothing written; a bad input is one ConfigError naming its
field) and ``run(store, ...)``, the stream of :mod:`workbench.run.events` it measures with. The CLI
iterates that stream in its own process; the window's worker thread iterates a
:class:`BackgroundJob`'s, which runs the job in an engine child where its backend would compute
in process, and turns a cancel into ending that process. :mod:`workbench.run.progress` reads either
stream into done / total / time left.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from workbench.config import SweepSpec
from workbench.jobs.background import BackgroundJob
from workbench.jobs.base import (
    BackendRefused,
    BackendUnavailable,
    Job,
    Plan,
    Timing,
    backend_for,
    check_points,
    computes_in_process,
    job_names,
)
from workbench.jobs.group import (
    GROUP_KIND,
    GroupError,
    GroupJob,
    GroupPlan,
    group_specs,
    measure_group_point,
    plan_group,
    run_group,
)
from workbench.jobs.ladder import (
    LADDER_DEFAULTS,
    LadderJob,
    LadderStepError,
    ladder_defaults,
    ladder_job,
    run_ladder,
)
from workbench.jobs.sweep import SweepJob, run_sweep
from workbench.run.events import (
    GroupStarted,
    JobFinished,
    JobStarted,
    LadderStarted,
    Skipped,
    SweepStarted,
)

__all__ = [
    "GROUP_KIND",
    "LADDER_DEFAULTS",
    "BackendRefused",
    "BackendUnavailable",
    "BackgroundJob",
    "GroupError",
    "GroupJob",
    "GroupPlan",
    "GroupStarted",
    "Job",
    "JobFinished",
    "JobStarted",
    "LadderJob",
    "LadderStarted",
    "LadderStepError",
    "Plan",
    "Skipped",
    "SweepJob",
    "SweepStarted",
    "Timing",
    "backend_for",
    "check_points",
    "computes_in_process",
    "group_specs",
    "job_for",
    "ladder_defaults",
    "ladder_job",
    "measure_group_point",
    "plan_group",
    "run_group",
    "run_ladder",
    "run_sweep",
]


def job_for(spec: SweepSpec, backends: Sequence[str]) -> SweepJob | GroupJob:
    """What to run for ``backends``: one name is a sweep on it, several are a group of them
    (on ``spec``'s problem, lengths and config)."""
    names = job_names(backends)
    if not names:
        raise GroupError("backends", list(backends), "expected at least one backend")
    if len(names) == 1:
        return SweepJob(dataclasses.replace(spec, backend=names[0]))
    return GroupJob(spec, tuple(names), spec.label)
