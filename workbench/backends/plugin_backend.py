"""A user's attention callable as a backend: what :func:`declare` makes of a plugin.

The callable takes the workbench's inputs and problem and returns the output, or (output,
log-sum-exp): ``attention(q, k, v, *, problem, config, knobs) -> out | (out, lse)``, with q, k,
v in (batch, heads, seq, head_dim) and ``knobs`` the plugin's own knob values. A plugin with
setup to do before the timed launches gives ``prepare(q, k, v, *, problem, config, knobs)``
returning a no-argument launch instead. Inputs are host NumPy float32 arrays holding
values of the problem's dtype (``inputs="numpy"``) or CPU torch tensors of them
(``inputs="torch"``), both timed by the wall clock; or torch CUDA tensors of the problem's dtype
(``inputs="cuda"``, :class:`DevicePluginBackend`), timed by the torch peers' GPU sampler. The
output is checked against float64 attention at every point; ``reference_scores(scores,
knobs)`` transforms the float64 scores first where the plugin changes them on purpose (a soft
cap). ``block_map(problem, config, knobs)`` reports the blocks it computed
(:mod:`workbench.backends.plugin_blocks`); without it a point's block map is the tile
schedule's model.
"""

from __future__ import annotations

import dataclasses
import functools
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels import knobs as knob_registry
from workbench.backends.base import (
    Availability,
    Backend,
    OpenPoint,
    PointResult,
    refuse_split_head_dims,
    round_to_dtype,
)
from workbench.backends.declaration import (
    BackendDeclaration,
    Capabilities,
    PluginSource,
    knob_violation,
)
from workbench.backends.gpu import gpu_machine_info
from workbench.backends.plugin_blocks import BlockMapCall, check_at_load, reported_map, trial_cases
from workbench.backends.plugin_checks import LSE_TOLERANCE, check_transformed, lse_error
from workbench.backends.plugin_compile import point_resources
from workbench.backends.plugin_device import device_availability, local_arch
from workbench.backends.plugin_env import knob_settings
from workbench.backends.plugin_errors import PluginError, guarded, plugin_code
from workbench.backends.plugin_tuning import candidate_timer, search_space, tune, tuned_names
from workbench.backends.torch_base import TorchBackend
from workbench.config import ConfigError, KernelConfig, Problem
from workbench.measure.accuracy import AccuracyReport, check_output
from workbench.measure.timing import TimingSettings, TimingStats

# The input kinds a plugin declares; "cuda" is timed on the device (plugin_device).
INPUT_KINDS = ("numpy", "torch", "cuda")


@dataclass(frozen=True)
class PluginCallable:
    """The factory of a plugin's backend: its callable and what the loader learnt of it."""

    name: str
    label: str
    attention: Callable[..., Any] | None
    prepare: Callable[..., Callable[[], Any]] | None
    reference_scores: Callable[[np.ndarray, Mapping[str, Any]], np.ndarray] | None
    inputs: str
    capabilities: Capabilities
    knobs: tuple[knob_registry.Knob, ...]
    rules: tuple[knob_registry.Rule, ...]
    probe: Callable[[], Availability] | None
    source: PluginSource | None = None
    # (problem, config, knobs, arch) -> the cubin, compiled offline (plugin_compile)
    compile_cubin: Callable[..., bytes] | None = None
    # (problem, config, knobs) -> BlockReport: the blocks it computed (plugin_blocks)
    block_map: BlockMapCall | None = None

    def __call__(self) -> PluginBackend:
        if self.inputs == "cuda":
            return DevicePluginBackend(self)
        return PluginBackend(self)


def declare(
    name: str,
    label: str,
    attention: Callable[..., Any] | None = None,
    *,
    prepare: Callable[..., Callable[[], Any]] | None = None,
    capabilities: Capabilities | None = None,
    knobs: tuple[knob_registry.Knob, ...] = (),
    rules: tuple[knob_registry.Rule, ...] = (),
    reference_scores: Callable[[np.ndarray, Mapping[str, Any]], np.ndarray] | None = None,
    inputs: str = "numpy",
    probe: Callable[[], Availability] | None = None,
    notes: str = "",
    compile_cubin: Callable[..., bytes] | None = None,
    block_map: BlockMapCall | None = None,
) -> BackendDeclaration:
    """A plugin's backend declaration (see the module's text for the callable's form)."""
    caps = capabilities if capabilities is not None else Capabilities()
    listed_probe = probe
    if inputs == "cuda":  # listed unavailable, in one line, where there is no GPU
        listed_probe = functools.partial(device_availability, probe, label)
    factory = PluginCallable(
        name, label, attention, prepare, reference_scores, inputs, caps, tuple(knobs),
        tuple(rules), probe, compile_cubin=compile_cubin, block_map=block_map,
    )  # fmt: skip
    return BackendDeclaration(
        name=name,
        label=label,
        factory=factory,
        capabilities=caps,
        knobs=tuple(knobs),
        rules=tuple(rules),
        probe=listed_probe,
        notes=notes,
        on_host=inputs != "cuda",  # numpy or torch: host arrays
    )


def with_source(declaration: BackendDeclaration, source: PluginSource) -> BackendDeclaration:
    """``declaration`` as loaded from ``source`` (its backend then says so in each run)."""
    factory = declaration.factory
    if isinstance(factory, PluginCallable):
        factory = dataclasses.replace(factory, source=source)
    return dataclasses.replace(declaration, factory=factory, source=source)


def plugin_errors(factory: PluginCallable) -> list[tuple[str, str]]:
    """(field, reason) of what is wrong with a plugin's callable part."""
    errors = []
    if (factory.attention is None) == (factory.prepare is None):
        errors.append(("attention", "give exactly one of attention= and prepare="))
    elif not callable(factory.attention or factory.prepare):
        errors.append(("attention", "not callable"))
    if factory.inputs not in INPUT_KINDS:
        errors.append(("inputs", f"{factory.inputs!r}: expected one of {', '.join(INPUT_KINDS)}"))
    if factory.reference_scores is not None and not callable(factory.reference_scores):
        errors.append(("reference_scores", "not callable"))
    if factory.compile_cubin is not None and not callable(factory.compile_cubin):
        errors.append(("compile_cubin", "not callable"))
    return errors


def check_block_map(declaration: BackendDeclaration, where: str) -> None:
    """Refuse a plugin's ``block_map=`` that is not callable or reports wrongly on the trial
    problems of each mask its default knobs run."""
    factory = declaration.factory
    if not isinstance(factory, PluginCallable) or factory.block_map is None:
        return
    caps = factory.capabilities
    masks = tuple(m for m in caps.masks if knob_violation(declaration, {}, m) is None)
    cases = trial_cases(caps.head_dims, caps.dtypes, masks)
    check_at_load(factory.block_map, cases, declaration.knob_defaults(), where)


class PluginBackend(Backend):
    """A plugin's callable behind the backend interface; it runs in the engine child."""

    def __init__(self, plugin: PluginCallable) -> None:
        self.plugin = plugin
        self.name = plugin.name  # type: ignore[misc]
        self.description = plugin.label  # type: ignore[misc]
        own = {k.name for k in plugin.knobs}
        # What the user set with --plugin-knob: the tuner leaves these alone.
        self.fixed = {k: v for k, v in knob_settings().items() if k in own}
        self.given_values = {**{k.name: k.default for k in plugin.knobs}, **self.fixed}
        self.knob_values = dict(self.given_values)  # this point's: the tuner's where tuned
        self._tuning: dict[str, Any] | None = None
        self._lse: Any = None
        self._lse_err: float | None = None

    def availability(self) -> Availability:
        if self.plugin.probe is not None:
            return self.plugin.probe()
        where = self.plugin.source.path if self.plugin.source else "a plugin"
        return Availability(True, f"plugin {self.plugin.label} from {where}")

    def default_timing(self) -> TimingSettings:
        return TimingSettings(warmup=1, min_samples=3, min_time_s=0.0, max_time_s=20.0)

    def machine_info(self) -> dict[str, Any]:
        source = self.plugin.source.to_dict() if self.plugin.source else {}
        # plugin_tunable: the knobs an autotuned run's tuner chose per point (its summary says so).
        tunable = tuned_names(self.declaration_view(), self.fixed)
        return {**source, "plugin_knobs": dict(self.given_values), "plugin_tunable": tunable}

    def check_supported(self, problem: Problem, config: KernelConfig) -> None:
        super().check_supported(problem, config)
        self.check_declared(problem, config)

    def check_declared(self, problem: Problem, config: KernelConfig) -> None:
        """Refuse what the declaration does not take (its dtypes, masks, head dims, knob
        values and rules); nothing is allocated, so an offline compile checks the same."""
        caps, who = self.plugin.capabilities, self.name
        if problem.dtype not in caps.dtypes:
            raise ConfigError("dtype", problem.dtype, f"{who} takes {', '.join(caps.dtypes)}")
        if config.mask not in caps.masks:
            raise ConfigError("mask", config.mask, f"{who} takes {', '.join(caps.masks)}")
        # A plugin's declaration has no value head dim: it is given q, k and v of one D.
        refuse_split_head_dims(problem, who)
        if caps.head_dims is not None and problem.head_dim not in caps.head_dims:
            raise ConfigError("head_dim", problem.head_dim, f"{who} takes {caps.head_dims}")
        if not caps.decode and problem.q_len != problem.k_len:
            raise ConfigError("q_len", problem.q_len, f"{who} runs q_len = k_len only")
        if config.bnhd_inputs and "bnhd" not in caps.layouts:
            raise ConfigError("bnhd_inputs", True, f"{who} takes (B, H, N, D) inputs only")
        if config.tuned:  # the tuner's space, refused before anything runs when it is empty
            search_space(self.declaration_view(), self.fixed, config.mask)
        else:
            refused = knob_violation(self.declaration_view(), self.knob_values, config.mask)
            if refused is not None:  # named as the command line sets it
                raise ConfigError(f"--plugin-knob {refused.field}", refused.value, refused.reason)
        if self.plugin.block_map is not None and problem.lengths is None:
            self.reported(problem, config)  # a wrong report is refused before anything is written

    def tuning_machine(self) -> str:
        """What a tuned choice was timed on: this host (a host plugin's launches run here)."""
        return platform.node()

    def where(self) -> str:
        """The plugin's file (its name where it has none), as its errors name it."""
        return self.plugin.source.path if self.plugin.source else self.name

    def reported(self, problem: Problem, config: KernelConfig) -> Any:
        """The plugin's report of ``problem``, checked
        (:func:`~workbench.backends.plugin_blocks.reported_map`)."""
        assert self.plugin.block_map is not None
        return reported_map(self.plugin.block_map, problem, config, self.knob_values, self.where())

    def declaration_view(self) -> BackendDeclaration:
        p = self.plugin
        return BackendDeclaration(p.name, p.label, p, p.capabilities, p.knobs, p.rules)

    def upload(self, arrays: tuple[np.ndarray, ...], problem: Problem) -> tuple[Any, ...]:
        rounded = tuple(round_to_dtype(a, problem.dtype) for a in arrays)
        if self.plugin.inputs == "torch":
            import torch

            return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in rounded)
        return rounded

    def host_view(self, tensor: Any) -> Any:
        if self.plugin.inputs == "torch" and hasattr(tensor, "detach"):
            return tensor.detach().cpu().float().numpy()
        return tensor

    def prepare(
        self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]
    ) -> Callable[[], Any]:
        self._tuning, self._lse = None, None
        self.knob_values = dict(self.given_values)
        if config.tuned:
            version = self.plugin.source.sha256 if self.plugin.source else ""

            def make(values: dict[str, Any]) -> Callable[[], Any]:
                return self._launch_with(problem, config, inputs, values)

            timer = candidate_timer(make, self.sampler, self.synchronize)
            chosen, self._tuning = tune(
                self.declaration_view(), self.fixed, version, problem, config, timer,
                machine=self.tuning_machine(),
            )  # fmt: skip
            self.knob_values = dict(chosen)
        return self._launch_with(problem, config, inputs, self.knob_values)

    def _launch_with(
        self,
        problem: Problem,
        config: KernelConfig,
        inputs: tuple[Any, ...],
        values: dict[str, Any],
    ) -> Callable[[], Any]:
        """The plugin's launch on ``inputs`` with its own knobs at ``values``."""
        q, k, v = inputs
        given = {"problem": problem, "config": config, "knobs": dict(values)}
        plugin, where = self.plugin, self.where()
        if plugin.prepare is not None:
            with plugin_code(where, "prepare"):  # its error at the line of its file
                call = guarded(plugin.prepare(q, k, v, **given), where, "its launch")
        else:
            assert plugin.attention is not None
            attention = guarded(plugin.attention, where, "attention")

            def call() -> Any:
                return attention(q, k, v, **given)

        def launch() -> Any:
            result = call()
            if isinstance(result, tuple):  # (output, log-sum-exp)
                result, self._lse = result[0], result[1]
            return result

        return launch

    def check_accuracy(
        self,
        q: Any,
        k: Any,
        v: Any,
        out: Any,
        problem: Problem,
        config: KernelConfig,
        rng: np.random.Generator,
    ) -> AccuracyReport:
        transform = self.plugin.reference_scores
        if transform is not None:
            transform = guarded(transform, self.where(), "reference_scores")
        self._lse_err = None
        if self._lse is not None:  # the checked launch returned (output, log-sum-exp)
            self._lse_err = self._checked_lse(q, k, problem, config, rng, transform)
        if transform is None:
            return check_output(q, k, v, out, problem, config, rng)
        return check_transformed(q, k, v, out, problem, config, rng, transform, self.knob_values)

    def _checked_lse(
        self,
        q: Any,
        k: Any,
        problem: Problem,
        config: KernelConfig,
        rng: np.random.Generator,
        transform: Any,
    ) -> float:
        """The returned log-sum-exp's largest error; a PluginError in one line past
        :data:`LSE_TOLERANCE` (or of the wrong shape): the run stops there, as for a wrong
        output."""
        lse = self._lse  # (B, H, q_len) floats: small enough to copy whole
        if hasattr(lse, "detach"):  # a torch tensor, on the GPU or not
            lse = lse.detach().float().cpu().numpy()
        try:
            err = lse_error(q, k, lse, problem, config, rng, transform, self.knob_values)
        except ValueError as exc:
            raise PluginError(f"{self.where()}: {exc}; expected (batch, heads, q_len)") from exc
        if not err <= LSE_TOLERANCE:  # NaN too
            raise PluginError(
                f"{self.where()}: the log-sum-exp it returned is off by {err:.3g} against "
                f"float64 (tolerance {LSE_TOLERANCE}): ln of the sum of exp(score / sqrt(D)) "
                "over the keys each row sees, shape (batch, heads, q_len)"
            )
        return err

    def close_point(self, opened: OpenPoint, timing: TimingStats) -> PointResult:
        result = super().close_point(opened, timing)
        result.extra.update(plugin_knobs=dict(self.knob_values), returned_lse=self._lse is not None)
        if self._lse_err is not None:  # checked against float64 at this point
            result.extra["lse_max_abs_err"] = self._lse_err
        if self._tuning is not None:  # what the tuner tried and chose at this point
            result.extra["plugin_tuning"] = self._tuning
            result.extra["tune_s"] = self._tuning["tune_s"]  # of compile_s, as our kernel's
        if self.plugin.block_map is None:  # the tile schedule's visibility: the model of it
            result.extra["block_map_source"] = "schedule"
            return result
        found = self.reported(opened.problem, opened.config)
        result.extra.update(found.extra)
        return dataclasses.replace(result, block_map=found.grid)  # what the plugin says it did


class DevicePluginBackend(PluginBackend, TorchBackend):
    """A ``cuda`` plugin (:mod:`workbench.backends.plugin_device`): the plugin's callable and
    checks, the torch peers' inputs, memory accounting and sampler; a plugin that declares
    ``compile_cubin`` stores with each point what it compiled to on this GPU."""

    def availability(self) -> Availability:
        return device_availability(self.plugin.probe, self.plugin.label)

    def default_timing(self) -> TimingSettings:
        return TorchBackend.default_timing(self)

    def machine_info(self) -> dict[str, Any]:
        return {**gpu_machine_info(), **PluginBackend.machine_info(self)}

    def tuning_machine(self) -> str:
        """The GPU a choice was timed on, on this host."""
        return f"{platform.node()} {gpu_machine_info().get('gpu_name', '')}".strip()

    def host_view(self, tensor: Any) -> Any:
        return TorchBackend.host_view(self, tensor)

    def close_point(self, opened: OpenPoint, timing: TimingStats) -> PointResult:
        result = super().close_point(opened, timing)
        # After the timed region: a cuTile plugin's compile (seconds) never sits in it.
        found = point_resources(
            self.plugin, opened.problem, opened.config, self.knob_values, local_arch()
        )
        if found is not None:
            result.extra["resources"] = found
        return result
