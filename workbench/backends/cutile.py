"""The project's cuTile FlashAttention kernel, with every knob of the optimization stack.

Inputs live in CuPy arrays (bfloat16 through ml_dtypes, which CuPy accepts). Each point keeps
the launch plan the timed launch ran (:class:`kernels.cutile.plan.LaunchPlan`: the form, the
tiles, the split count an "auto" resolved to on this GPU, the grid). The block map of a point
comes from the instrumented kernel, run with the same tiles and knobs as the timed one (the
autotuned ones when autotuning, the plan's split count), and is checked against the host
schedule.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from kernels import knobs, schedule
from kernels.cutile import paged
from kernels.cutile.arrays import (
    contiguous,
    fill,
    lib_of,
    output_like,
    to_kernel_dtype,
)
from kernels.cutile.diagnostics import assess
from kernels.cutile.plan import LaunchPlan
from kernels.decode_choice import DECODE_SEARCHED
from kernels.schedule import Schedule
from workbench.backends import cutile_serving
from workbench.backends.base import Availability, Backend, OpenPoint, PointResult, host_inputs
from workbench.backends.cupy_base import CupyBackend
from workbench.backends.declaration import BackendDeclaration, Capabilities
from workbench.backends.gpu import HostView, cupy_device, device_inputs
from workbench.backends.torch_base import upload_serving
from workbench.config import ConfigError, KernelConfig, Problem, refuse_first
from workbench.measure.machine import cuda_home_problem
from workbench.measure.timing import TimingSettings, TimingStats

KERNEL_HEAD_DIMS = knobs.HEAD_DIM.values_for(knobs.CUTILE)


def _knobs(launch_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The kernel knobs of a launch's keyword arguments (what is not the problem's mask)."""
    return {k: v for k, v in launch_kwargs.items() if k not in ("mask", "input_pos", "window")}


def launch_knobs(config: KernelConfig) -> dict[str, Any]:
    """The kernel's launch knobs (LaunchConfig's fields, :data:`kernels.knobs.LAUNCH`) of a
    hand-set workbench config."""
    return {name: getattr(config, name) for name in knobs.LAUNCH}


def tuning_fixed(config: KernelConfig) -> dict[str, Any]:
    """The launch knobs the tuner keeps as the config has them (the ones it does not search,
    :data:`kernels.knobs.FIXED_IN_TUNING`); the decode ones only where the config sets them
    (a preset), so that on a decode-bound problem the tuner searches the decode form."""
    fixed = {name: getattr(config, name) for name in knobs.FIXED_IN_TUNING}
    for name in DECODE_SEARCHED:
        if fixed[name] == knobs.KNOBS[name].default:
            del fixed[name]
    return fixed


def _kernel_module() -> Any:
    from kernels import cutile_fmha

    return cutile_fmha


class CutileBackend(CupyBackend):
    name = "cutile"
    description = "the project's cuTile FlashAttention kernel"
    runs_ragged = True  # varlen prefill and paged KV (workbench.backends.cutile_serving)

    def __init__(self) -> None:
        self._out: Any = None
        self._kwargs: dict[str, Any] = {}
        self._tuning: dict[str, Any] | None = None
        self._decode: Schedule | None = None  # the decode form's schedule, at its last point
        self._plan: LaunchPlan | None = None  # what the timed launch ran, at its last point
        self._tune_s = 0.0
        self._map_s = 0.0
        self._split_map: np.ndarray | None = None  # which split read each block (decode form)
        self._ragged: dict[str, Any] | None = None  # a ragged point's plan record

    def availability(self) -> Availability:
        try:
            import cuda.tile  # noqa: F401
        except ImportError:
            return Availability(
                False, "cuda-tile is not installed: pip install 'fmha-workbench[gpu]'"
            )
        except Exception as exc:
            return Availability(False, f"cuda-tile failed to load: {exc}")
        device = cupy_device()
        if not device.available:
            return device
        trap = cuda_home_problem()
        import cupy

        from workbench.backends.gpu import tileiras_version

        # The kernel package decides (kernels.cutile.diagnostics.assess), from the device CuPy
        # sees: the one this backend's inputs live on.
        props = cupy.cuda.runtime.getDeviceProperties(0)
        arch = f"sm_{props['major']}{props['minor']}"
        verdict = assess(arch, tileiras_version(), device.reason)
        if not verdict.available:
            return Availability(False, verdict.message)
        from kernels.tuning_spaces import table_status

        # The device line names the architecture already, e.g. "NVIDIA H200 (sm_90)".
        status = table_status(arch)
        note = f"; note: {trap}" if trap else ""
        return Availability(
            True, f"cuTile on {device.reason}, {status}, {verdict.tileiras_version}{note}"
        )

    def default_timing(self) -> TimingSettings:
        return TimingSettings(warmup=5, min_samples=30, min_time_s=0.5)

    def check_supported(self, problem: Problem, config: KernelConfig) -> None:
        super().check_supported(problem, config)
        for field, dim in (("head_dim", problem.head_dim), ("head_dim_v", problem.value_dim)):
            if dim not in KERNEL_HEAD_DIMS:  # V's head dim comes from the kernel's list too
                raise ConfigError(field, dim, f"the cuTile kernel takes {KERNEL_HEAD_DIMS}")
        if problem.lengths is not None:  # the serving kernels take their own knobs
            cutile_serving.ragged_launch(problem, config)
            return
        # The kernel's own value sets (the registry's narrower ones); with autotune the tuner
        # sets the tunable knobs, so the config's are not checked.
        refuse_first(knobs.value_violations(config.knob_values(), capability=knobs.CUTILE))

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> tuple[Any, ...]:
        if problem.lengths is not None:  # the serving layouts, the reference's host values
            self.lib = "torch"
            return upload_serving(host_inputs(problem, rng), problem.dtype)
        inputs = tuple(to_kernel_dtype(x, problem.dtype) for x in device_inputs(problem, rng))
        # bfloat16 comes as torch tensors (CuPy has none): the launches then run on torch's
        # current stream, and the sampler must time that stream.
        self.lib = lib_of(inputs[0])
        return inputs

    def _launch_kwargs(
        self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]
    ) -> dict[str, Any]:
        fmha = _kernel_module()
        common = {
            "mask": config.mask,
            "input_pos": problem.input_pos,
            "window": config.window,
        }
        self._tune_s = 0.0
        if config.tuned:
            started = time.perf_counter()
            chosen = fmha.autotune(*inputs, **common, **tuning_fixed(config))
            self._tuning = chosen.get("_tuning")
            self._tune_s = time.perf_counter() - started
            return {**common, **fmha.tuned_kwargs(chosen)}
        self._tuning = None
        return {**common, **launch_knobs(config)}

    def prepare(
        self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]
    ) -> Callable[[], Any]:
        if problem.lengths is not None:
            return self._prepare_ragged(problem, config, inputs)
        self._ragged = None
        fmha = _kernel_module()
        q, k, v = inputs
        self._kwargs = self._launch_kwargs(problem, config, inputs)
        kwargs = dict(self._kwargs)
        if config.bnhd_inputs:
            # A model's projections: (B, N, H, D) buffers of the same values, which the kernel
            # reads in place through strided views; the output comes back in that layout.
            q, k, v = (contiguous(x.swapaxes(1, 2)) for x in (q, k, v))
            kwargs["layout"] = "bnhd"
        self._out = output_like(q, problem.value_dim)  # q's layout, Dv wide
        out = self._out

        def as_bhnd(result: Any) -> Any:  # what the accuracy check compares
            return result.swapaxes(1, 2) if config.bnhd_inputs else result

        if config.one_shot:
            # What a model's eager forward pays each call: attention() checks its inputs and
            # finds the launch it kept from the first call.
            self._plan = fmha.launch_plan(q, k, v, out=out, **kwargs)
            return lambda: as_bhnd(fmha.attention(q, k, v, out=out, **kwargs))
        # Validate, pick the kernel variant and build the argument tuple once, so the timed
        # loop pays for the launch alone.
        launch = fmha.prepare(q, k, v, out=out, **kwargs)
        self._plan = launch.plan
        return (lambda: as_bhnd(launch())) if config.bnhd_inputs else launch

    def _prepare_ragged(
        self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]
    ) -> Callable[[], Any]:
        import torch

        launch = cutile_serving.ragged_launch(problem, config)
        sms = None
        plan = None
        if launch.kernel == "paged":
            q_device = inputs[0].device  # a CPU tensor only under the emulator's tests
            sms = (
                torch.cuda.get_device_properties(q_device).multi_processor_count
                if q_device.type == "cuda"
                else paged.DEFAULT_SMS
            )
            plan = cutile_serving.paged_plan(problem, launch, sms)
        self._plan, self._kwargs, self._tuning, self._tune_s = None, {}, None, 0.0
        self._ragged = cutile_serving.plan_record(problem, launch, plan, sms)
        call, self._out = cutile_serving.prepare(problem, launch, inputs, plan)
        return call

    def host_view(self, tensor: Any) -> Any:
        # A ragged batch's offsets and block table stay on the host (the check reads them).
        return tensor if isinstance(tensor, np.ndarray) else HostView(tensor)

    def poison_output(self) -> None:
        if self._out is not None:
            fill(self._out, np.nan)

    def _launched(self) -> dict[str, Any]:
        """The knob values that were timed (the tuner's, when autotuning), the others at their
        defaults: what the schedule of the launch reads."""
        return {**knobs.defaults(), **_knobs(self._kwargs)}

    def block_map(self, problem: Problem, config: KernelConfig) -> np.ndarray:
        """From the instrumented kernel, with the tiles and knobs that were timed. In the
        decode form the kernel also records which split read each key block; the split count
        is the one the timed launch's plan resolved on this GPU's SM count (the map's own
        launch, of one slice, would pick another)."""
        if problem.lengths is not None:  # no instrumented serving kernel: the host model's map
            return Backend.block_map(self, problem, config)
        fmha = _kernel_module()
        launch = _knobs(self._kwargs)
        self._decode = None
        self._split_map = None
        if self._plan is not None:
            launch = {**launch, **self._plan.resolved_knobs()}
            if self._plan.form == "decode":
                values = {**knobs.defaults(), **launch}
                self._decode = schedule.schedule_of(values, problem, config.mask, config.window)
        started = time.perf_counter()
        # The tile shape goes first, positionally; the other knobs by name.
        tiles = schedule.tile_shape(launch)
        others = {k: v for k, v in launch.items() if k not in schedule.TILE_KNOBS}
        recorded = fmha.gpu_block_map(
            problem.q_len,
            problem.k_len,
            *tiles,
            config.mask,
            problem.input_pos,
            config.window,
            batch=1,
            heads=problem.group_size,
            kv_heads=1,
            head_dim=problem.head_dim,
            dtype=problem.dtype,
            lib="cupy",
            **others,
        )
        self._map_s = time.perf_counter() - started
        self._split_map = recorded.split_map
        return recorded.map

    def release(self) -> None:
        self._out = None
        super().release()

    def close_point(self, opened: OpenPoint, timing: TimingStats) -> PointResult:
        # The tuner's search ran inside prepare(); it is not compilation, so compile times of
        # tuned and hand-set runs compare (the search's time is kept as tune_s).
        compile_s = max(opened.compile_s - self._tune_s, 0.0)
        if opened.problem.lengths is not None:
            ragged = dataclasses.replace(
                super().close_point(opened, timing), compile_s=compile_s, plan=self._ragged
            )
            ragged.extra["block_map_source"] = "host model"  # what it ran is in its plan
            return ragged
        result = dataclasses.replace(
            super().close_point(opened, timing),
            compile_s=compile_s,
            plan=self._plan.to_dict() if self._plan is not None else None,
        )
        problem, config = opened.problem, opened.config
        kw = self._kwargs
        if self._decode is not None:
            expected = self._decode.block_map
            result.extra.update(
                schedule.split_facts(self._decode),
                block_map_source="kernel",
                split_map_matches_schedule=self._split_map is not None
                and bool(np.array_equal(self._split_map, self._decode.split_map)),
            )
        else:
            tiled = schedule.tile_schedule(self._launched(), problem, config.mask, config.window)
            expected = tiled.block_map
        result.extra.update(
            launch=_knobs(kw),
            tune_s=round(self._tune_s, 3),
            block_map_s=round(self._map_s, 3),
            block_map_matches_schedule=bool(np.array_equal(result.block_map, expected)),
        )
        if self._tuning is not None:
            result.extra["autotune"] = self._tuning
        return result


DECLARATIONS = (
    BackendDeclaration(
        name=CutileBackend.name,
        label=CutileBackend.description,
        factory=CutileBackend,
        capabilities=Capabilities(layouts=("bhnd", "bnhd"), head_dims=KERNEL_HEAD_DIMS),
        knob_capability=knobs.CUTILE,
        kernel_knobs=True,
        tunes=True,
        kernel_resources=True,
    ),
)
