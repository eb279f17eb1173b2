"""The tuner of a plugin: its declared tunable knobs searched per point.

A plugin marks the knobs that change speed but not the result ``Knob(..., tunable=True)`` (a
tile, a chunk, warps); a knob that changes what is computed (a soft cap) stays the user's. With
the config's tuner on (:data:`kernels.knobs.TUNER`), each point times every combination of the
tunable knobs the user did not fix with ``--plugin-knob`` (their declared values, the plugin's
rules applied under the point's mask) on the point's own inputs, and launches the fastest; the
point then records the values it ran and what was tried. A choice is kept for the engine
child's life per problem, mask, file version and fixed values, so a group's later rounds and a
rerun tune once.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kernels.knobs import TUNER
from workbench.backends.declaration import BackendDeclaration, knob_violation
from workbench.config import ConfigError, KernelConfig, Problem
from workbench.measure.timing import TimingSettings, measure

# More combinations than this take too long to time at every point: the user fixes some.
MAX_CANDIDATES = 64
# Few short samples a candidate: the tuner ranks, the point's own timing measures.
TUNING_TIMING = TimingSettings(
    warmup=1, min_samples=3, max_samples=20, min_time_s=0.0, max_time_s=2.0, graph=False
)
# Refusals name the registry's tuner knob: the CLI says its flag, the window its label.
TUNE_FIELD = TUNER.name

_chosen: dict[tuple[Any, ...], dict[str, Any]] = {}


@dataclass(frozen=True)
class Candidate:
    values: dict[str, Any]  # every own knob's value: the fixed ones and the tuned ones
    tuned: dict[str, Any]  # the tuned knobs' values alone


def tuned_names(declaration: BackendDeclaration, fixed: Mapping[str, Any]) -> list[str]:
    """The declared tunable knobs the user left to the tuner."""
    return [knob.name for knob in declaration.knobs if knob.tunable and knob.name not in fixed]


def search_space(
    declaration: BackendDeclaration, fixed: Mapping[str, Any], mask: str
) -> list[Candidate]:
    """Every combination of the tunable knobs not in ``fixed`` that the plugin's knobs and
    rules take under ``mask``; a ConfigError naming the tuner's knob when there are none to
    tune, none pass, or more than :data:`MAX_CANDIDATES` would be timed."""
    names = tuned_names(declaration, fixed)
    who = declaration.name
    if not names:
        fixed_words = f" ({', '.join(fixed)} fixed by --plugin-knob)" if fixed else ""
        raise ConfigError(
            TUNE_FIELD, True, f"{who} has no tunable knob left to tune{fixed_words}; declare "
            "one Knob(..., tunable=True)",
        )  # fmt: skip
    own = {knob.name: knob for knob in declaration.knobs}
    count = 1
    for name in names:
        count *= len(own[name].values)
    if count > MAX_CANDIDATES:
        raise ConfigError(
            TUNE_FIELD, True, f"{who}'s tunable knobs ({', '.join(names)}) make {count} "
            f"combinations, more than the {MAX_CANDIDATES} the tuner times at each point; "
            "fix some with --plugin-knob NAME=VALUE",
        )  # fmt: skip
    base = {**declaration.knob_defaults(), **fixed}
    space = []
    for combo in itertools.product(*(own[name].values for name in names)):
        tuned = dict(zip(names, combo, strict=True))
        values = {**base, **tuned}
        if knob_violation(declaration, values, mask) is None:
            space.append(Candidate(values, tuned))
    if not space:
        raise ConfigError(
            TUNE_FIELD, True, f"no combination of {who}'s tunable knobs ({', '.join(names)}) "
            f"passes its rules under the {mask} mask",
        )  # fmt: skip
    return space


def problem_key(problem: Problem, config: KernelConfig) -> tuple[Any, ...]:
    return (
        problem.batch, problem.heads, problem.kv_heads, problem.q_len, problem.k_len,
        problem.head_dim, problem.dtype, problem.input_pos, config.mask, config.window,
        config.bnhd_inputs,
    )  # fmt: skip


def tune(
    declaration: BackendDeclaration,
    fixed: Mapping[str, Any],
    version: str,
    problem: Problem,
    config: KernelConfig,
    time_launch: Callable[[dict[str, Any]], float],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fastest candidate's knob values for this point, and the record the point stores
    (``chosen``, ``tried``, each candidate's median ms, ``tune_s``, ``cached``).
    ``time_launch(values)`` times one candidate on the point's inputs (its median, ms)."""
    key = (declaration.name, version, problem_key(problem, config), tuple(sorted(fixed.items())))
    space = search_space(declaration, fixed, config.mask)
    if key in _chosen:
        kept = _chosen[key]
        return kept["values"], {**kept["record"], "cached": True, "tune_s": 0.0}
    started = time.perf_counter()
    times = [(candidate, time_launch(candidate.values)) for candidate in space]
    best, _ = min(times, key=lambda pair: pair[1])
    record = {
        "chosen": best.tuned,
        "tried": len(space),
        "times_ms": [[candidate.tuned, round(ms, 6)] for candidate, ms in times],
        "tune_s": round(time.perf_counter() - started, 3),
        "cached": False,
    }
    _chosen[key] = {"values": best.values, "record": record}
    return best.values, record


def candidate_timer(
    make_launch: Callable[[dict[str, Any]], Callable[[], Any]],
    sampler: Callable[[Callable[[], Any], TimingSettings], Any],
    synchronize: Callable[[], None],
) -> Callable[[dict[str, Any]], float]:
    """``time_launch`` for :func:`tune` from a backend's parts: build the candidate's launch,
    run it once (a compile), then its median over :data:`TUNING_TIMING`."""

    def time_launch(values: dict[str, Any]) -> float:
        launch = make_launch(values)
        launch()
        synchronize()
        return measure(sampler(launch, TUNING_TIMING), TUNING_TIMING).median_ms

    return time_launch
