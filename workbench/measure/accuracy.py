"""Check a backend's output against a float64 reference on a sample of the problem.

Recomputing a whole large problem in float64 on the CPU would take longer than the sweep, so
for big problems a fixed number of (batch, head) slices and query rows is checked; the first and
last rows are always among them because the causal diagonal and the ragged edge live there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels.reference import masked_softmax_product
from kernels.schedule import visible_block
from workbench.config import KernelConfig, Problem

MAX_SLICES = 4
MAX_ROWS = 256
# ‖out − ref‖ / ‖ref‖ allowed for half-precision inputs with float32 accumulation.
TOLERANCE = {"float16": 1e-2, "bfloat16": 1e-2}


@dataclass(frozen=True)
class AccuracyReport:
    max_abs_err: float
    rel_err: float  # norm-wise: ‖out − ref‖ / ‖ref‖
    checked_rows: int
    tolerance: float

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.rel_err)) and self.rel_err <= self.tolerance


def sample_indices(
    problem: Problem, rng: np.random.Generator
) -> tuple[list[tuple[int, int]], np.ndarray]:
    """(batch, head) slices and query rows to check."""
    slices = [(b, h) for b in range(problem.batch) for h in range(problem.heads)]
    if len(slices) > MAX_SLICES:
        picks = rng.choice(len(slices), size=MAX_SLICES, replace=False)
        slices = [slices[i] for i in sorted(picks)]
    if problem.q_len <= MAX_ROWS:
        rows = np.arange(problem.q_len)
    else:
        middle = rng.choice(np.arange(1, problem.q_len - 1), size=MAX_ROWS - 2, replace=False)
        rows = np.sort(np.concatenate([[0, problem.q_len - 1], middle]))
    return slices, rows


def reference_rows(
    q: Any,
    k: Any,
    v: Any,
    batch_index: int,
    head: int,
    rows: np.ndarray,
    config: KernelConfig,
    input_pos: int,
    scale: float,
) -> np.ndarray:
    """float64 masked softmax(Q Kᵀ·scale) V for the chosen rows of one (batch, head)."""
    group = q.shape[1] // k.shape[1]
    qf = np.asarray(q[batch_index, head, rows], dtype=np.float64)
    kf = np.asarray(k[batch_index, head // group], dtype=np.float64)
    vf = np.asarray(v[batch_index, head // group], dtype=np.float64)
    scores = (qf @ kf.T) * scale
    seen = visible_block(rows, range(k.shape[2]), config.mask, input_pos, config.window)
    return masked_softmax_product(scores, seen, vf)


def check_output(
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    problem: Problem,
    config: KernelConfig,
    rng: np.random.Generator,
) -> AccuracyReport:
    """Compare ``out`` with the float64 reference on a sample.

    q, k, v and out are NumPy arrays or host views of device tensors: only ``.shape`` and
    ``x[b, h, rows]`` / ``x[b, h]`` indexing are used, so only the sampled part is copied.

    NaN anywhere in the checked part makes the error NaN, which never passes.
    """
    scale = 1.0 / np.sqrt(problem.head_dim)
    slices, rows = sample_indices(problem, rng)
    diff_sq = ref_sq = 0.0
    max_abs = 0.0
    for b, h in slices:
        ref = reference_rows(q, k, v, b, h, rows, config, problem.input_pos, scale)
        got = np.asarray(out[b, h, rows], dtype=np.float64)
        diff = got - ref
        diff_sq += float(np.sum(diff * diff))
        ref_sq += float(np.sum(ref * ref))
        max_abs = max(max_abs, float(np.max(np.abs(diff))) if diff.size else 0.0)
    if not np.isfinite(diff_sq):
        max_abs = rel = float("nan")
    else:
        rel = float(np.sqrt(diff_sq / ref_sq)) if ref_sq > 0 else float(np.sqrt(diff_sq))
    return AccuracyReport(max_abs, rel, len(rows) * len(slices), TOLERANCE[problem.dtype])
