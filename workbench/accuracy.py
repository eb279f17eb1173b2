"""Check a backend's output against a float64 reference on a sample of the problem.

Recomputing a whole large problem in float64 on the CPU would take longer than the sweep, so
for big problems a fixed number of (batch, head) slices and query rows is checked; the first and
last rows are always among them because the causal diagonal and the ragged edge live there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    batch_index: int,
    head: int,
    rows: np.ndarray,
    config: KernelConfig,
    input_pos: int,
    scale: float,
) -> np.ndarray:
    """float64 masked softmax(Q Kᵀ·scale) V for the chosen rows of one (batch, head)."""
    group = q.shape[1] // k.shape[1]
    qf = q[batch_index, head, rows].astype(np.float64)
    kf = k[batch_index, head // group].astype(np.float64)
    vf = v[batch_index, head // group].astype(np.float64)
    scores = (qf @ kf.T) * scale
    seen = visible_block(rows, range(k.shape[2]), config.mask, input_pos, config.window)
    scores = np.where(seen, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isneginf(row_max), 0.0, row_max)
    weights = np.exp(scores - row_max)
    total = weights.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (weights @ vf) / np.where(total > 0, total, 1), 0.0)


def check_output(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    out: np.ndarray,
    problem: Problem,
    config: KernelConfig,
    rng: np.random.Generator,
) -> AccuracyReport:
    """Compare ``out`` (any float dtype, host memory) with the float64 reference on a sample.

    NaN anywhere in the checked part makes the error NaN, which never passes.
    """
    scale = 1.0 / np.sqrt(problem.head_dim)
    slices, rows = sample_indices(problem, rng)
    diff_sq = ref_sq = 0.0
    max_abs = 0.0
    for b, h in slices:
        ref = reference_rows(q, k, v, b, h, rows, config, problem.input_pos, scale)
        got = out[b, h, rows].astype(np.float64)
        diff = got - ref
        diff_sq += float(np.sum(diff * diff))
        ref_sq += float(np.sum(ref * ref))
        max_abs = max(max_abs, float(np.max(np.abs(diff))) if diff.size else 0.0)
    if not np.isfinite(diff_sq):
        max_abs = rel = float("nan")
    else:
        rel = float(np.sqrt(diff_sq / ref_sq)) if ref_sq > 0 else float(np.sqrt(diff_sq))
    return AccuracyReport(max_abs, rel, len(rows) * len(slices), TOLERANCE[problem.dtype])
