"""A GPU backend seen through the supervised engine: the real backend runs in the child.

The proxy answers cheap questions (availability, timing defaults) itself and sends everything
that touches device memory (capacity, machine metadata, the measurement) to the engine child.
Expected refusals (a ConfigError, a BackendError) come back as themselves and leave the child
running; anything else ends the child and the run is marked failed with the child's error text.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from workbench.backends.base import Availability, Backend, BackendError, PointResult
from workbench.backends.catalog import UnknownBackend, builtin_names, forget_plugins, load_backend
from workbench.backends.interleave import interleaved_point
from workbench.backends.plugin_env import DIGESTS, plugin_environment
from workbench.config import ConfigError, KernelConfig, Problem
from workbench.measure.timing import TimingSettings
from workbench.run.engine import Engine, EngineFailure

_engine: Engine | None = None
_child_backends: dict[str, Backend] = {}
_followed: dict[str, str] | None = None  # the plugin settings this child last took


def shared_engine() -> Engine:
    """One engine per process: one GPU context, one compile cache in memory."""
    global _engine
    if _engine is None:
        _engine = Engine()
    return _engine


def _follow_plugins(environment: dict[str, str] | None) -> None:
    """In the engine child: take the parent's plugins (files, knob values, the files' hashes)
    where they changed since the last call, so an edited or added plugin is imported afresh."""
    global _followed
    if environment is None or environment == _followed:
        return
    _followed = environment
    os.environ.update({k: v for k, v in environment.items() if k != DIGESTS})
    forget_plugins()
    for name in set(_child_backends) - set(builtin_names()):
        del _child_backends[name]


def _in_child(name: str) -> Backend:
    if name not in _child_backends:
        _child_backends[name] = load_backend(name)
    return _child_backends[name]


def child_call(name: str, method: str, *args: Any, plugins: dict[str, str] | None = None) -> Any:
    """Run ``backend.method(*args)`` in the engine child with the parent's ``plugins``
    (:func:`~workbench.backends.plugin_env.plugin_environment`); expected refusals come back
    as data."""
    try:
        _follow_plugins(plugins)
        return ("ok", getattr(_in_child(name), method)(*args))
    except (ConfigError, BackendError, UnknownBackend) as exc:
        return ("refused", exc)


class IsolatedBackend(Backend):
    def __init__(self, inner: Backend, engine: Engine | None = None) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]
        self.description = inner.description  # type: ignore[misc]
        self._engine = engine

    @property
    def engine(self) -> Engine:
        return self._engine or shared_engine()

    def _call(self, method: str, *args: Any) -> Any:
        kind, value = self.engine.call(
            "workbench.backends.isolated:child_call",
            self.name,
            method,
            *args,
            plugins=plugin_environment(),
        )
        if kind == "refused":
            raise value
        return value

    def availability(self) -> Availability:
        return self.inner.availability()

    def default_timing(self) -> TimingSettings:
        return self.inner.default_timing()

    def machine_info(self) -> dict[str, Any]:
        return self._call("machine_info")

    def check_supported(self, problem: Problem, config: KernelConfig) -> None:
        self._call("check_supported", problem, config)

    def measure_point(
        self,
        problem: Problem,
        config: KernelConfig,
        settings: TimingSettings,
        rng: np.random.Generator,
    ) -> PointResult:
        return self._call("measure_point", problem, config, settings, rng)

    def prepare(self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]) -> Any:
        raise NotImplementedError("the real backend prepares in the engine child")


def child_group_point(
    names: list[str],
    problems: list[Problem],
    configs: list[KernelConfig],
    timings: list[TimingSettings],
    seed: np.random.SeedSequence,
    plugins: dict[str, str] | None = None,
) -> tuple[list[Any], bool]:
    """In the engine child: one length of a group, interleaved
    (:mod:`workbench.backends.interleave`). Also says whether a fault that may have poisoned
    this CUDA context happened."""
    faults: list[BaseException] = []
    _follow_plugins(plugins)
    backends = [_in_child(name) for name in names]
    outcomes = interleaved_point(backends, problems, configs, timings, seed, faults)
    return outcomes, bool(faults)


def group_in_engine(
    backends: list[Backend],
    problems: list[Problem],
    configs: list[KernelConfig],
    timings: list[TimingSettings],
    seed: np.random.SeedSequence,
) -> list[Any]:
    """One length of a group for backends that run in the engine: one engine call, so they
    are interleaved there. A crash of the child fails every one of them with its error."""
    engines = {id(b.engine) for b in backends if isinstance(b, IsolatedBackend)}
    if len(engines) != 1:
        raise BackendError("the GPU backends of a group must share one engine")
    engine = backends[0].engine  # type: ignore[attr-defined]
    names = [b.name for b in backends]
    try:
        outcomes, faulted = engine.call(
            "workbench.backends.isolated:child_group_point",
            names, problems, configs, timings, seed, plugin_environment(),
        )  # fmt: skip
    except EngineFailure as exc:
        return [f"EngineFailure: {exc}"] * len(backends)
    if faulted:
        engine.close()  # its CUDA context may be poisoned: the next call starts a fresh child
    return outcomes
