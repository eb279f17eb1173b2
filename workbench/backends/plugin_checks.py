"""A plugin's results against float64 where the plugin differs from plain attention: its output
under its own transform of the scores (a soft cap), and the log-sum-exp it returns beside the
output. A kernel whose output is right but whose LSE is wrong (a missing scale, log2 for ln)
would break whatever combines its partial results (split-K decode, ring attention), so a point
says so.

The convention is FlashAttention's: for each query row, the natural log of the sum of
exp(score) over the keys it sees, the scores scaled by 1/sqrt(D) (and passed through the
plugin's own ``reference_scores`` where it declares one), shape (batch, heads, q_len).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from kernels.reference import masked_softmax_product
from kernels.schedule import visible_block
from workbench.config import KernelConfig, Problem
from workbench.measure.accuracy import TOLERANCE, AccuracyReport, sample_indices

Transform = Callable[[np.ndarray, Mapping[str, Any]], np.ndarray]

# In natural-log units: float32 accumulation over fp16/bf16 inputs lands well inside this; a
# scale or base mistake is off by whole units.
LSE_TOLERANCE = 0.05


def sampled_scores(
    q: Any,
    k: Any,
    problem: Problem,
    config: Any,
    rng: np.random.Generator,
    transform: Transform | None,
    knob_values: Mapping[str, Any],
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    """For each sampled (batch, head): batch, KV head, the sampled rows, their float64 scores
    (scaled by 1/sqrt(D), through ``transform`` where given) and which keys each row sees."""
    scale = 1.0 / np.sqrt(problem.head_dim)
    slices, rows = sample_indices(problem, rng)
    group = q.shape[1] // k.shape[1]
    for b, h in slices:
        qf = np.asarray(q[b, h, rows], dtype=np.float64)
        kf = np.asarray(k[b, h // group], dtype=np.float64)
        scores = (qf @ kf.T) * scale
        if transform is not None:
            scores = transform(scores, knob_values)
        seen = visible_block(rows, range(k.shape[2]), config.mask, problem.input_pos, config.window)
        yield b, h, rows, scores, seen


def check_transformed(
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    problem: Problem,
    config: KernelConfig,
    rng: np.random.Generator,
    transform: Transform,
    knob_values: Mapping[str, Any],
) -> AccuracyReport:
    """:func:`workbench.measure.accuracy.check_output` with the float64 scores passed through the
    plugin's ``transform`` before the mask and softmax (a soft cap)."""
    group = q.shape[1] // k.shape[1]
    diff_sq = ref_sq = max_abs = 0.0
    count = 0
    for b, h, rows, scores, seen in sampled_scores(
        q, k, problem, config, rng, transform, knob_values
    ):
        ref = masked_softmax_product(scores, seen, np.asarray(v[b, h // group], dtype=np.float64))
        diff = np.asarray(out[b, h, rows], dtype=np.float64) - ref
        diff_sq += float(np.sum(diff * diff))
        ref_sq += float(np.sum(ref * ref))
        max_abs = max(max_abs, float(np.max(np.abs(diff))) if diff.size else 0.0)
        count += len(rows)
    if not np.isfinite(diff_sq):
        max_abs = rel = float("nan")
    else:
        rel = float(np.sqrt(diff_sq / ref_sq)) if ref_sq > 0 else float(np.sqrt(diff_sq))
    return AccuracyReport(max_abs, rel, count, TOLERANCE[problem.dtype])


def lse_error(
    q: Any,
    k: Any,
    lse: Any,
    problem: Problem,
    config: Any,
    rng: np.random.Generator,
    transform: Transform | None,
    knob_values: Mapping[str, Any],
) -> float:
    """The largest absolute difference between ``lse`` and float64's on a sample of rows
    (rows that see no key are skipped); NaN where the plugin's is not finite where float64's
    is. A ValueError naming the shape when ``lse`` is not (batch, heads, q_len)."""
    found = np.asarray(lse)
    want = (problem.batch, problem.heads, problem.q_len)
    if found.shape != want:
        raise ValueError(f"the log-sum-exp it returned has shape {found.shape}, not {want}")
    worst = 0.0
    for b, h, rows, scores, seen in sampled_scores(
        q, k, problem, config, rng, transform, knob_values
    ):
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
