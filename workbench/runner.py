"""Run a sweep point by point: a plain generator of a run's events (:mod:`workbench.events`).

The jobs (:mod:`workbench.jobs`) are built on it. The runner checks everything that can be checked
before anything is written (backend available, every point's shape valid and within memory), then
stores the run, measures each sequence length, checks its output against float64 and commits the
point at once. A cancel request is honoured between points; a backend failure ends the run as
'failed' with the error text and the points already measured.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator

import numpy as np

from workbench.backends import Backend, get_backend
from workbench.backends.base import BackendError
from workbench.config import ConfigError, SweepSpec
from workbench.events import PointFinished, PointStarted, RunFinished, RunStarted
from workbench.events import RunEvent as Event
from workbench.machine import host_info
from workbench.store import Store, StoreError, StoreLocked
from workbench.timing import TimingSettings

__all__ = [
    "BackendUnavailable",
    "Event",
    "PointFinished",
    "PointStarted",
    "RunFinished",
    "RunStarted",
    "check_available",
    "check_points",
    "preflight",
    "run_sweep",
]


class BackendUnavailable(BackendError):
    pass


def preflight(spec: SweepSpec, backend: Backend) -> None:
    """Everything that can be refused before a run is written."""
    check_available(spec, backend)
    check_points(spec, backend)


def check_available(spec: SweepSpec, backend: Backend) -> None:
    status = backend.availability()
    if not status.available:
        raise BackendUnavailable(f"backend {spec.backend!r} is not available: {status.reason}")


def check_points(spec: SweepSpec, backend: Backend) -> None:
    """The backend's refusals of ``spec``'s points, for a caller that already knows it is
    available (asking again probes the GPU again)."""
    for problem in spec.problems():
        backend.check_supported(problem, spec.config)


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
) -> Iterator[Event]:
    """Measure ``spec`` and store it. Raises ConfigError / BackendUnavailable before writing
    (unless ``checked``: a job's preflight already asked the backend)."""
    backend = backend or get_backend(spec.backend)
    if not checked:
        preflight(spec, backend)
    settings = timing or backend.default_timing()
    machine = {**host_info(), **backend.machine_info()}
    run_id = store.create_run(spec, machine, group_id=group_id, step=step)
    return _measure(spec, store, backend, settings, run_id, cancel)


def _measure(
    spec: SweepSpec,
    store: Store,
    backend: Backend,
    settings: TimingSettings,
    run_id: int,
    cancel: Callable[[], bool] | None,
) -> Iterator[Event]:
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
            yield PointStarted(run_id, index, total, problem.q_len)
            result = backend.measure_point(
                problem, spec.config, settings, np.random.default_rng(child_seed)
            )
            try:
                point = store.add_point(run_id, result)
            except StoreLocked as exc:
                status, error = "failed", _locked_error(store, run_id, result, exc)
                break
            yield PointFinished(run_id, index, total, point, time.perf_counter() - started)
            if not result.accuracy.passed:
                status = "failed"
                error = (
                    f"wrong result at N={problem.q_len}: relative error "
                    f"{result.accuracy.rel_err:.3g} against float64 exceeds "
                    f"{result.accuracy.tolerance:g}"
                )
                break
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM at the CLI (its own message)
        store.finish_run(run_id, "cancelled", str(exc) or "interrupted by the user")
        raise
    except GeneratorExit:
        # The consumer stopped listening (window closed, Ctrl-C in a caller): keep what we have.
        store.finish_run(run_id, "cancelled", "stopped before the sweep finished")
        raise
    except (BackendError, ConfigError, MemoryError, RuntimeError, OSError, ValueError) as exc:
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # an unexpected bug still leaves the run marked, with the trace
        status = "failed"
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"
    store.finish_run(run_id, status, error)
    yield RunFinished(run_id, status, error)


def _locked_error(store: Store, run_id: int, result: object, exc: StoreLocked) -> str:
    """The reason a run stops when another writer kept the lock past the retries; the point
    just measured is stored if the lock frees within the store's final patience."""
    n = result.problem.q_len  # type: ignore[attr-defined]
    try:
        store.add_point(run_id, result, patient=True)
        kept = f"the point at N={n} was stored once the lock was free"
    except StoreError:
        kept = f"the point measured at N={n} could not be stored"
    return f"stopped at N={n}: {exc} ({kept}; the points before it are kept)"
