"""One length of several backends on the same inputs, timed together in balanced rounds.

Where it runs is the caller's choice: in this process for the CPU backends, inside the engine
child for the GPU ones (:mod:`workbench.backends.isolated`).
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np

from workbench.backends.base import Backend, PointResult
from workbench.config import ConfigError, KernelConfig, Problem
from workbench.errors import BackendError
from workbench.measure.timing import TimingSettings, measure_interleaved

Outcome = PointResult | str  # a result, or the error that ended this backend's run


def interleaved_point(
    backends: Sequence[Backend],
    problems: Sequence[Problem],
    configs: Sequence[KernelConfig],
    timings: Sequence[TimingSettings],
    seed: np.random.SeedSequence,
    faults: list[BaseException] | None = None,
) -> list[Outcome]:
    """Open every backend's point (inputs from the same seed, compile, check), time them
    together in balanced rounds, close them. A backend that fails to open is reported by its
    error and left out of the timing; a refusal of one never stops the others. Errors that
    are not refusals (a CUDA fault may have poisoned the context) are also put in ``faults``."""
    opened: list[Any] = []
    outcomes: list[Outcome | None] = []
    for backend, problem, config, timing in zip(backends, problems, configs, timings, strict=True):
        try:
            point = backend.open_point(problem, config, timing, np.random.default_rng(seed))
            opened.append((backend, point, timing))
            outcomes.append(None)
        except Exception as exc:  # a bug in one backend must not end the others' runs
            outcomes.append(f"{type(exc).__name__}: {exc}")
            if faults is not None and not isinstance(exc, (ConfigError, BackendError)):
                faults.append(exc)
    if not opened:
        return [o if o is not None else "nothing was measured" for o in outcomes]
    try:
        stats = measure_interleaved([p.sampler for _, p, _ in opened], [t for _, _, t in opened])
    except Exception as exc:
        if faults is not None:
            faults.append(exc)
        for backend, _, _ in opened:
            backend.release()
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
        return [o if o is not None else error for o in outcomes]
    results = iter(
        backend.close_point(point, timing)
        for (backend, point, _), timing in zip(opened, stats, strict=True)
    )
    return [o if o is not None else next(results) for o in outcomes]
