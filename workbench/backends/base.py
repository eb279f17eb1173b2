"""The one interface every backend implements, and the measurement template they share.

A backend knows how to make inputs in its own memory, how to prepare (compile) a kernel for a
problem and config, how to time it and where its block map comes from. :meth:`Backend.measure_point`
is the same for all of them: fresh random inputs, compile timed apart, one poisoned launch checked
against float64, then the shared timing harness.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from kernels import schedule
from kernels.schedule import Schedule, kind_counts
from workbench.analysis.ragged_map import RaggedMap
from workbench.analysis.serving_blocks import sequence_reads, serving_flops, stacked_block_map
from workbench.config import ConfigError, KernelConfig, Problem
from workbench.errors import BackendError as BackendError  # re-exported: where backends raise it
from workbench.measure.accuracy import AccuracyReport, check_output
from workbench.measure.serving_inputs import check_serving_output, serving_host_inputs
from workbench.measure.timing import (
    CpuSampler,
    Sampler,
    TimingSettings,
    TimingStats,
    measure,
    timing_facts,
)


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str  # one line: what is used, or why not and what to do


@dataclass(frozen=True)
class PointResult:
    """Everything measured at one sequence length. Picklable, so it can cross processes."""

    problem: Problem
    timing: TimingStats
    compile_s: float
    accuracy: AccuracyReport
    block_map: np.ndarray  # (q-blocks, k-blocks) BlockKind codes for one (batch, head) slice
    flops: int  # useful FLOPs of the whole problem (the TFLOP/s convention)
    peak_mem_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # The launch plan the kernel ran (kernels.cutile.plan.LaunchPlan.to_dict), where it has one.
    plan: dict[str, Any] | None = None

    @property
    def tflops(self) -> float:
        return self.flops / (self.timing.median_ms * 1e-3) / 1e12

    def block_counts(self) -> dict[str, int]:
        """Blocks of each kind; a ragged batch's within each sequence's own key blocks (the
        grey right of a short sequence is the stacked picture's padding, not skipped work)."""
        ragged = RaggedMap.of(self.extra, self.block_map.shape[0])
        return ragged.own_counts(self.block_map) if ragged else kind_counts(self.block_map)


def problem_flops(problem: Problem, config: KernelConfig) -> int:
    """2·B·H·Nq·Nk·(D + Dv) (Q·Kᵀ and P·V; 4·B·H·Nq·Nk·D where Dv = D), halved for causal;
    for a window, 2·B·H·(D + Dv) per visible (row, key) pair.

    Causal uses the conventional half so figures compare with published ones; the exact count of
    visible pairs differs from half by (Nq + 1) / (2·Nq), under 0.1 % at N ≥ 1024. A ragged
    batch counts its real lengths (:func:`~workbench.analysis.serving_blocks.serving_flops`).
    """
    if problem.lengths is not None:
        return serving_flops(problem, config)
    widths = problem.head_dim + problem.value_dim
    dense = 2 * problem.batch * problem.heads * problem.q_len * problem.k_len * widths
    if config.mask == "none":
        return dense
    if config.mask == "causal":
        return dense // 2
    window = schedule.tile_schedule(config.knob_values(), problem, "window", config.window)
    flops = window.flops_useful(problem.head_dim, problem.value_dim)
    return flops * problem.batch * problem.heads


def refuse_split_head_dims(problem: Problem, who: str) -> None:
    """Refuse Dv != D for a backend ``who`` that runs V at the query/key head dim only."""
    if problem.split_head_dims:
        raise ConfigError(
            "head_dim_v",
            problem.value_dim,
            f"{who} runs V at the query/key head dim ({problem.head_dim}) only; leave it out "
            "or use the cutile, reference or naive backend",
        )


def decode_form(config: KernelConfig) -> bool:
    """Does ``config`` run the decode form (the schedule's :func:`kernels.schedule.decode_form`)?"""
    return schedule.decode_form(config.knob_values())


def schedule_for(
    problem: Problem, config: KernelConfig, sm_slots: int = schedule.NOMINAL_SM_SLOTS
) -> Schedule:
    """The tile schedule of one (batch, head) slice of ``problem`` under ``config``; in the
    decode form one (batch, KV head) slice with its packed rows and its splits."""
    return schedule.schedule_of(config.knob_values(), problem, config.mask, config.window, sm_slots)


def host_inputs(problem: Problem, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Fresh standard-normal q, k, v in float32, rounded to the problem's dtype.

    Rounding on the host means every backend sees the same values that a half-precision tensor
    holds, so their outputs can be compared with one float64 reference. A ragged batch's come
    in its serving layout (:func:`~workbench.measure.serving_inputs.serving_host_inputs`).
    """
    assert problem.kv_heads is not None
    if problem.lengths is not None:
        return serving_host_inputs(problem, rng, round_to_dtype)
    shapes = [
        (problem.batch, problem.heads, problem.q_len, problem.head_dim),
        (problem.batch, problem.kv_heads, problem.k_len, problem.head_dim),
        (problem.batch, problem.kv_heads, problem.k_len, problem.value_dim),
    ]
    return tuple(
        round_to_dtype(rng.standard_normal(s, dtype=np.float32), problem.dtype) for s in shapes
    )


def round_to_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values rounded to float16 or bfloat16 precision, still stored as float32."""
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":
        bits = np.array(x, dtype=np.float32, order="C", copy=True).view(np.uint32)
        # Round to nearest even on the 16 bits that bfloat16 drops, in place with one temporary
        # (a serving batch's K and V are hundreds of millions of values: 7x faster than fresh
        # arrays for each step).
        carry = bits >> 16
        carry &= 1
        carry += 0x7FFF
        bits += carry
        bits &= 0xFFFF0000
        return bits.view(np.float32)
    raise ValueError(f"unknown dtype {dtype!r}")


class Backend(ABC):
    """One way of running attention. Subclasses fill in the hooks below."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    # What a user comparing with it should know (its limits in decode): `backends`, tooltips.
    notes: ClassVar[str] = ""
    # Whether it runs a ragged batch (varlen prefill, paged decode) in the serving layouts.
    runs_ragged: ClassVar[bool] = False

    @abstractmethod
    def availability(self) -> Availability:
        """Cheap, never raises."""

    def default_timing(self) -> TimingSettings:
        return TimingSettings()

    def memory_capacity(self) -> int | None:
        """Bytes the backend's tensors may use, or None when unknown."""
        return None

    def machine_info(self) -> dict[str, Any]:
        return {}

    def check_supported(self, problem: Problem, config: KernelConfig) -> None:
        """Raise :class:`~workbench.config.ConfigError` for what this backend cannot run."""
        if problem.lengths is not None and not self.runs_ragged:
            raise ConfigError(
                "backend", self.name, "does not run a ragged batch (varlen prefill or a "
                "paged KV cache); docs/serving.md lists the backends that do",
            )  # fmt: skip
        problem.check_fits(self.memory_capacity())

    # Hooks for measure_point.
    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> tuple[Any, ...]:
        """Fresh random q, k, v in the backend's memory. GPU backends draw them on the device
        (a 16k-token problem has hundreds of millions of elements)."""
        return self.upload(host_inputs(problem, rng), problem)

    def upload(self, arrays: tuple[np.ndarray, ...], problem: Problem) -> tuple[Any, ...]:
        """Host float32 arrays -> the backend's tensors in the problem's dtype."""
        raise NotImplementedError(f"{self.name} makes its inputs on the device")

    def host_view(self, tensor: Any) -> Any:
        """Something with ``.shape`` whose indexing returns host NumPy arrays, so the accuracy
        check copies only the rows it samples. NumPy arrays are their own view."""
        return tensor

    def synchronize(self) -> None:  # noqa: B027 - optional hook
        """Wait for queued device work (so the compile time includes the first launch)."""

    @abstractmethod
    def prepare(
        self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]
    ) -> Callable[[], Any]:
        """Compile or otherwise get ready; return a no-argument launch that returns the output."""

    def poison_output(self) -> None:  # noqa: B027 - optional hook
        """Fill the prepared launch's output buffer with NaN (when it reuses one), so that the
        checked launch proves it wrote every element."""

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
        """The checked launch's output against float64 attention on a sample (a plugin that
        changes the scores on purpose checks against its own transform of them)."""
        return check_output(q, k, v, out, problem, config, rng)

    def sampler(self, launch: Callable[[], Any], settings: TimingSettings) -> Sampler:
        """How this backend's launches are timed (see :mod:`workbench.measure.timing`)."""
        return CpuSampler(launch, between=self.between_samples(settings))

    def between_samples(self, settings: TimingSettings) -> Callable[[], object] | None:
        return None

    def block_map(self, problem: Problem, config: KernelConfig) -> np.ndarray:
        if problem.lengths is not None:  # each sequence's own map, one below the other
            return stacked_block_map(sequence_reads(problem, config))
        return schedule_for(problem, config).block_map

    def peak_memory_bytes(self) -> int | None:
        """Bytes in use at the peak since :meth:`reset_peak_memory`, less what was in use
        then (other backends of a group hold their own inputs)."""
        return None

    def reset_peak_memory(self) -> None:  # noqa: B027 - optional hook
        pass

    def release(self) -> None:  # noqa: B027 - optional hook
        """Free what a point left behind (device memory pools)."""

    def open_point(
        self,
        problem: Problem,
        config: KernelConfig,
        settings: TimingSettings,
        rng: np.random.Generator,
    ) -> OpenPoint:
        """Everything before the timed region: fresh inputs, compile (timed apart), one
        poisoned launch checked against float64, the warm-up, and the sampler."""
        self.check_supported(problem, config)
        try:
            self.reset_peak_memory()
            inputs = self.make_inputs(problem, rng)
            started = time.perf_counter()
            launch = self.prepare(problem, config, inputs)
            launch()  # the first launch compiles where the backend compiles lazily
            self.synchronize()
            compile_s = time.perf_counter() - started

            self.poison_output()
            checked_out = launch()
            self.synchronize()
            views = [self.host_view(x) for x in inputs]
            out = self.host_view(checked_out)
            if problem.lengths is not None:
                accuracy = check_serving_output(views, out, problem, config, rng)
            else:
                q, k, v = views
                accuracy = self.check_accuracy(q, k, v, out, problem, config, rng)
            del checked_out, out, views
            for _ in range(settings.warmup):
                launch()
            self.synchronize()
            sampler = self.sampler(launch, settings)
        except BaseException:
            self.release()
            raise
        return OpenPoint(problem, config, inputs, sampler, compile_s, accuracy)

    def close_point(self, opened: OpenPoint, timing: TimingStats) -> PointResult:
        """After the timed region: peak memory, the block map, and the point's result."""
        try:
            peak = self.peak_memory_bytes()
            grid = self.block_map(opened.problem, opened.config)
        finally:
            opened.inputs = ()
            self.release()
        extra = timing_facts(timing)
        if opened.problem.lengths is not None:
            # Each sequence's pages, tail, key blocks and splits (`show`, the CSV, the window's
            # map), where the map is theirs (a plugin's own report may not be).
            reads = sequence_reads(opened.problem, opened.config)
            if np.array_equal(stacked_block_map(reads), grid):
                extra["sequences"] = [r.to_dict() for r in reads]
        return PointResult(
            problem=opened.problem,
            timing=timing,
            compile_s=opened.compile_s,
            accuracy=opened.accuracy,
            block_map=np.asarray(grid, dtype=np.int8),
            flops=problem_flops(opened.problem, opened.config),
            peak_mem_bytes=peak,
            extra=extra,
        )

    def measure_point(
        self,
        problem: Problem,
        config: KernelConfig,
        settings: TimingSettings,
        rng: np.random.Generator,
    ) -> PointResult:
        opened = self.open_point(problem, config, settings, rng)
        try:
            timing = measure(opened.sampler, settings)
        except BaseException:
            self.release()
            raise
        return self.close_point(opened, timing)


@dataclass
class OpenPoint:
    """A point ready to be timed: what :meth:`Backend.open_point` made."""

    problem: Problem
    config: KernelConfig
    inputs: tuple[Any, ...] = field(repr=False)
    sampler: Sampler = field(repr=False)
    compile_s: float
    accuracy: AccuracyReport
