"""The log-sum-exp a plugin returns beside its output, checked against float64: a kernel whose
output is right but whose LSE is wrong (a missing scale, log2 for ln) would break whatever
combines its partial results (split-K decode, ring attention), so a point says so.

The convention is FlashAttention's: for each query row, the natural log of the sum of
exp(score) over the keys it sees, the scores scaled by 1/sqrt(D) (and passed through the
plugin's own ``reference_scores`` where it declares one), shape (batch, heads, q_len).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kernels.schedule import visible_block
from workbench.config import Problem
from workbench.measure.accuracy import sample_indices

# In natural-log units: float32 accumulation over fp16/bf16 inputs lands well inside this; a
# scale or base mistake is off by whole units.
LSE_TOLERANCE = 0.05


def lse_error(
    q: Any,
    k: Any,
    lse: Any,
    problem: Problem,
    config: Any,
    rng: np.random.Generator,
    transform: Callable[[np.ndarray, Mapping[str, Any]], np.ndarray] | None,
    knob_values: Mapping[str, Any],
) -> float:
    """The largest absolute difference between ``lse`` and float64's on a sample of rows
    (rows that see no key are skipped); NaN where the plugin's is not finite where float64's
    is. A ValueError naming the shape when ``lse`` is not (batch, heads, q_len)."""
    found = np.asarray(lse)
    want = (problem.batch, problem.heads, problem.q_len)
    if found.shape != want:
        raise ValueError(f"the log-sum-exp it returned has shape {found.shape}, not {want}")
    scale = 1.0 / np.sqrt(problem.head_dim)
    slices, rows = sample_indices(problem, rng)
    group = q.shape[1] // k.shape[1]
    worst = 0.0
    for b, h in slices:
        qf = np.asarray(q[b, h, rows], dtype=np.float64)
        kf = np.asarray(k[b, h // group], dtype=np.float64)
        scores = (qf @ kf.T) * scale
        if transform is not None:
            scores = transform(scores, knob_values)
        seen = visible_block(rows, range(k.shape[2]), config.mask, problem.input_pos, config.window)
        masked = np.where(seen, scores, -np.inf)
        top = masked.max(axis=1)
        some = np.isfinite(top)
        ref = top[some] + np.log(np.exp(masked[some] - top[some, None]).sum(axis=1))
        got = np.asarray(found[b, h, rows], dtype=np.float64)[some]
        if not np.all(np.isfinite(got)):
            return float("nan")
        if ref.size:
            worst = max(worst, float(np.max(np.abs(got - ref))))
    return worst
