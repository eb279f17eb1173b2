"""The tuner of a plugin: its declared tunable knobs searched per point.

A plugin marks the knobs that change speed but not the result ``Knob(..., tunable=True)`` (a
tile, a chunk, warps); a knob that changes what is computed (a soft cap) stays the user's. With
the config's tuner on (:data:`kernels.knobs.TUNER`), each point times every combination of the
tunable knobs the user did not fix with ``--plugin-knob`` (their declared values, the plugin's
rules applied under the point's mask) on the point's own inputs, and launches the fastest; the
point then records the values it ran and what was tried. A choice is kept, in memory and on
disk, per problem, mask, file version, fixed values and machine, so a group's later rounds and
a later run of the same file tune once.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
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

# The file the choices are kept in across processes (tests point it at their own).
CACHE_ENV = "FMHA_WORKBENCH_PLUGIN_TUNE_CACHE"

_chosen: dict[str, dict[str, Any]] = {}


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


def cache_path() -> Path:
    """Where the plugins' tuned choices are kept across processes (beside our kernel's)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return Path.home() / ".cache" / "fmha-workbench" / "plugin-tuning.json"


def _read_kept() -> dict[str, Any]:
    try:
        data = json.loads(cache_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _keep(key: str, entry: dict[str, Any]) -> None:
    """Add one choice to the file (read, merged, replaced whole: a reader sees either)."""
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {**_read_kept(), key: entry}
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written costs a search next time, nothing more


def tune(
    declaration: BackendDeclaration,
    fixed: Mapping[str, Any],
    version: str,
    problem: Problem,
    config: KernelConfig,
    time_launch: Callable[[dict[str, Any]], float],
    machine: str = "",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fastest candidate's knob values for this point, and the record the point stores
    (``chosen``, ``tried``, each candidate's median ms, ``tune_s``, ``cached``).
    ``time_launch(values)`` times one candidate on the point's inputs (its median, ms). A
    choice is kept in memory and on disk (:func:`cache_path`) per plugin, file version,
    problem, mask, fixed knobs and ``machine`` (the GPU or host it was timed on), and only
    used while it is still one of the candidates."""
    space = search_space(declaration, fixed, config.mask)
    key = json.dumps(
        [declaration.name, version, machine, problem_key(problem, config), sorted(fixed.items())],
        default=str,
    )
    kept = _chosen.get(key) or _read_kept().get(key)
    if isinstance(kept, dict) and any(c.values == kept.get("values") for c in space):
        _chosen[key] = kept
        return dict(kept["values"]), {**kept["record"], "cached": True, "tune_s": 0.0}
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
    _keep(key, _chosen[key])
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
