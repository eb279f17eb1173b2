"""Peer: materialized attention in CuPy (scores, float32 softmax, second product).

It is the memory problem the fused kernel solves: the (N × N) score matrix per head. Peak device
memory is recorded per point, and a problem whose scores cannot fit is refused up front with the
number of bytes it would need, not left to crash in the allocator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from workbench.backends.base import Availability
from workbench.backends.cupy_base import CupyBackend
from workbench.backends.declaration import BackendDeclaration
from workbench.backends.gpu import (
    cupy_device,
    device_inputs,
)
from workbench.config import ConfigError, KernelConfig, Problem
from workbench.measure.timing import TimingSettings

# The launch works on one float32 (B, H, Nq, Nk) score buffer in place; allow 10 % for the
# allocator and the row statistics, plus float32 copies of the inputs.
SCORE_MARGIN = 1.1


def naive_bytes(problem: Problem) -> int:
    scores = problem.batch * problem.heads * problem.q_len * problem.k_len * 4
    return int(SCORE_MARGIN * scores) + 4 * problem.tensor_bytes()


class NaiveCupyBackend(CupyBackend):
    name = "naive"
    description = "materialized softmax(QKᵀ)V in CuPy"

    def availability(self) -> Availability:
        status = cupy_device()
        if not status.available:
            return status
        return Availability(True, f"CuPy materialized attention on {status.reason}")

    def default_timing(self) -> TimingSettings:
        return TimingSettings(warmup=2, min_samples=10, min_time_s=0.3)

    def check_supported(self, problem: Problem, config: KernelConfig) -> None:
        super().check_supported(problem, config)
        need, have = naive_bytes(problem), self.memory_capacity()
        if have is not None and need > have:
            raise ConfigError(
                "q_len",
                problem.q_len,
                f"naive attention needs {need / 2**30:.1f} GiB for the N×N scores at "
                f"N={problem.q_len} but the GPU has {have / 2**30:.1f} GiB free; "
                "that is the memory problem FlashAttention solves",
            )

    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> tuple[Any, ...]:
        import cupy

        # CuPy has no bfloat16: keep the (already bf16-rounded) values in float32.
        dtype = cupy.float16 if problem.dtype == "float16" else cupy.float32
        return tuple(x.astype(dtype) for x in device_inputs(problem, rng))

    def prepare(
        self, problem: Problem, config: KernelConfig, inputs: tuple[Any, ...]
    ) -> Callable[[], Any]:
        import cupy

        q, k, v = inputs
        group = problem.group_size
        scale = np.float32(1.0 / np.sqrt(problem.head_dim))
        rows = cupy.arange(problem.q_len)[:, None]
        keys = cupy.arange(problem.k_len)[None, :]
        bias = None  # (Nq, Nk) additive mask, broadcast over batch and heads
        if config.mask in ("causal", "window"):
            seen = keys <= rows + problem.input_pos
            if config.mask == "window":
                seen &= keys > rows + problem.input_pos - config.window
            bias = cupy.where(seen, 0.0, -cupy.inf).astype(cupy.float32)
        kf = cupy.repeat(k, group, axis=1) if group > 1 else k
        vf = cupy.repeat(v, group, axis=1) if group > 1 else v
        out_dtype = q.dtype

        def launch() -> Any:
            # One (B, H, Nq, Nk) buffer, updated in place: the memory cost being shown is the
            # score matrix itself, not temporaries.
            scores = cupy.matmul(q.astype(cupy.float32), kf.astype(cupy.float32).swapaxes(-1, -2))
            scores *= scale
            if bias is not None:
                scores += bias
            row_max = scores.max(axis=-1, keepdims=True)
            row_max = cupy.where(cupy.isneginf(row_max), 0, row_max)
            scores -= row_max
            cupy.exp(scores, out=scores)
            total = scores.sum(axis=-1, keepdims=True)
            out = cupy.matmul(scores, vf.astype(cupy.float32))
            out /= cupy.where(total > 0, total, 1)
            return out.astype(out_dtype)

        return launch


DECLARATIONS = (
    BackendDeclaration(
        name=NaiveCupyBackend.name,
        label=NaiveCupyBackend.description,
        factory=NaiveCupyBackend,
    ),
)
