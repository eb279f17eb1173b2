"""The CPU backend: the NumPy reference that walks the kernel's tile schedule."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from kernels.reference import walk_schedule
from kernels.schedule import Schedule, split_facts
from workbench.analysis.serving_blocks import SequenceRead, sequence_reads, stacked_block_map
from workbench.backends.base import (
    Availability,
    Backend,
    OpenPoint,
    PointResult,
    decode_form,
    round_to_dtype,
    schedule_for,
)
from workbench.backends.declaration import BackendDeclaration, Capabilities
from workbench.config import KernelConfig, Problem
from workbench.measure.noise import MIN_TURNS
from workbench.measure.serving_inputs import serving_launch
from workbench.measure.timing import TimingSettings, TimingStats


def _host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


class ReferenceBackend(Backend):
    name = "reference"
    description = "NumPy reference on the CPU (float32 arithmetic, same tile schedule)"
    runs_ragged = True  # varlen prefill and paged decode: kernels/reference_serving.py

    def __init__(self) -> None:
        self._visited: np.ndarray | None = None
        self._schedule: Schedule | None = None
        self._reads: list[SequenceRead] | None = None

    def machine_info(self) -> dict[str, Any]:
        from workbench.measure.blas import blas_threads

        # The BLAS threads it ran with (workbench.measure.blas): a point's time depends on them.
        return {"blas_threads": blas_threads()}

    def availability(self) -> Availability:
        return Availability(True, "NumPy reference on the CPU: always available")

    def default_timing(self) -> TimingSettings:
        # CPU attention is slow: the fewest samples whose turns measure the median's noise
        # (MIN_TURNS), so Compare and the ladder judge a step by its noise, not a fixed floor.
        return TimingSettings(warmup=0, min_samples=MIN_TURNS, min_time_s=0.0, max_time_s=20.0)

    def memory_capacity(self) -> int | None:
        # The reference holds float32 copies of q, k, v, the output and per-block temporaries:
        # allow a quarter of RAM for the half-precision tensors the estimate counts.
        total = _host_memory_bytes()
        return total // 4 if total else None

    def upload(self, arrays: tuple[np.ndarray, ...], problem: Problem) -> tuple[Any, ...]:
        # A ragged batch's offsets and block table are int32: only the tensors are rounded.
        return tuple(round_to_dtype(a, problem.dtype) if a.dtype.kind == "f" else a for a in arrays)

    def prepare(
        self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]
    ) -> Callable[[], Any]:
        if problem.lengths is not None:
            # Each sequence on its own (kernels/reference_serving.py); the block map is the
            # reference model of what each sequence's CTAs read
            # (workbench/analysis/serving_blocks.py).
            self._reads = sequence_reads(problem, config)
            self._schedule = None
            return serving_launch(problem, config, inputs)
        self._reads = None
        q, k, v = inputs
        # The schedule the launch walks: in the decode form its packed rows' tile and its
        # splits (auto resolved as on the H200, NOMINAL_SM_SLOTS), so the map is its own.
        self._schedule = schedule = schedule_for(problem, config)

        def launch() -> np.ndarray:
            out, visited = walk_schedule(schedule, q, k, v, return_block_map=True)
            self._visited = visited
            return out

        return launch

    def block_map(self, problem: Problem, config: KernelConfig) -> np.ndarray:
        if self._reads is not None:
            return stacked_block_map(self._reads)
        # What the reference actually visited on its last launch, not a recomputation.
        assert self._visited is not None
        return self._visited

    def close_point(self, opened: OpenPoint, timing: TimingStats) -> PointResult:
        result = super().close_point(opened, timing)
        schedule = self._schedule
        # A ragged batch's sequences are in result.extra already (Backend.close_point).
        if self._reads is None and schedule is not None and decode_form(opened.config):
            # Which split read which key blocks: the block map tab and `show` draw the splits.
            result.extra.update(split_facts(schedule))
        return result


DECLARATIONS = (
    BackendDeclaration(
        name=ReferenceBackend.name,
        label=ReferenceBackend.description,
        factory=ReferenceBackend,
        capabilities=Capabilities(layouts=("bhnd",)),
        kernel_knobs=True,  # it walks the kernel's tile schedule
        in_engine=False,  # NumPy on the CPU cannot poison a CUDA context: it runs where called
        on_host=True,
    ),
)
