"""The sweep process: runs the core's ``run_sweep`` or ``run_ladder`` away from the GUI.

No Qt here, on purpose: this module is what a ``spawn`` child imports. The GUI's worker thread
starts it for backends that compute in the calling process (the NumPy reference). Their Python
loops would otherwise hold the GIL the GUI thread needs for every repaint, and a measured 10 ms
event loop stalled for up to 300 ms. GPU backends already run in the core's supervised engine
process, so for them the worker thread calls ``run_sweep`` itself and keeps the engine (and its
compile cache) alive across runs.

A job is a :class:`~workbench.config.SweepSpec` (one run), a :class:`LadderJob` (one run per
ladder step, in one group) or a :class:`~workbench.jobs.GroupJob` (one run per backend, in one
group, timed interleaved); :func:`job_events` turns each into the core's events, so the worker
thread and the child share one path.

Messages on the pipe, child to parent, each a tuple:
``("event", Event)``, ``("rejected", field, message)``, ``("crashed", text)``, ``("done",)``.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only for annotations: the window must not import the runner at start-up
    from workbench.config import Problem
    from workbench.ladder import Ladder

CHILD_NICENESS = 10


@dataclass(frozen=True)
class LadderJob:
    """A ladder to run: its steps, and the problem, lengths and backend every step shares."""

    ladder: Ladder
    problem: Problem
    seq_lens: tuple[int, ...]
    backend: str
    label: str = ""
    seed: int | None = None


@dataclass(frozen=True)
class LadderStarted:
    """The ladder's group is stored (its steps follow): the first event of a LadderJob."""

    group_id: int
    steps: int


def job_events(job: Any, store: Any, cancel: Callable[[], bool], timing: Any) -> Iterator[Any]:
    """The core's events for ``job``: a sweep's, LadderStarted then every step's, or a
    group's (GroupStarted, then its runs' events).

    Raises the core's ConfigError (or BackendUnavailable) before anything is written.
    """
    from workbench.jobs import GroupJob, run_group_job  # the core, once a job runs

    if isinstance(job, GroupJob):
        yield from run_group_job(job, store, timing=timing, cancel=cancel)
        return
    if isinstance(job, LadderJob):
        from workbench.ladder import run_ladder

        group_id, events = run_ladder(
            job.ladder,
            job.problem,
            job.seq_lens,
            job.backend,
            store,
            label=job.label,
            timing=timing,
            cancel=cancel,
            seed=job.seed,
        )
        yield LadderStarted(group_id, len(job.ladder.steps))
        yield from events
        return
    from workbench.runner import run_sweep

    yield from run_sweep(job, store, cancel=cancel, timing=timing)


def run_in_child(job: Any, db_path: str, timing: Any, conn: Connection, cancel: Any) -> None:
    """Child entry point: stream the job's events through ``conn`` until it ends."""
    import os

    from workbench.config import ConfigError
    from workbench.store import Store

    # The desktop stays responsive while the CPU works flat out: the window's repaints (and the
    # user's other programs) go first. Only CPU backends run here, so no GPU timing is affected.
    # Not on this platform, or not allowed: run at normal priority.
    with contextlib.suppress(AttributeError, OSError):
        os.nice(CHILD_NICENESS)
    store = None
    try:
        store = Store(db_path)
        for event in job_events(job, store, cancel.is_set, timing):
            conn.send(("event", event))
    except ConfigError as exc:
        conn.send(("rejected", exc.field, str(exc)))
    except BaseException as exc:  # report everything: the parent shows it and lives on
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        conn.send(("crashed", detail))
    finally:
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()
        # The parent may have gone already; then there is nobody left to tell.
        with contextlib.suppress(OSError):
            conn.send(("done",))
            conn.close()
