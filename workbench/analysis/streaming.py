"""Where a memory-bound call's time goes: a fixed cost per call and a streaming rate.

A decode kernel reads K and V once, so across a sweep of k_len its latency is close to a line,
``fixed + K+V bytes / rate``. ``rate`` is how fast its steady state reads memory; ``fixed`` is
what every call pays whatever its length: the launch, the first loads' latency, the last CTA's
tail, a second launch such as the combine of a split key range. Two kernels level at one length
can differ in either, and only the fixed part can be cut without reading faster, so the fit
says which one to work on. It is taken over the points whose K+V cannot stay in L2 between
calls (:data:`COLD_KV_BYTES`), where every call reads HBM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from workbench.analysis.bandwidth import read_fraction_pct, read_line
from workbench.config import K_LEN_AXIS

# Twice the H200's 60 MB L2: past this, a call cannot find its K+V in L2 from the call before.
COLD_KV_BYTES = 128_000_000
# Two points always lie on a line: a third is the least that tests the line.
MIN_FIT_POINTS = 3
# A point further than this from the line: the latency is not fixed + bytes / rate there.
POOR_FIT_PCT = 3.0


@dataclass(frozen=True)
class StreamingFit:
    """``latency = fixed_us + bytes / rate_gbs`` over ``points`` lengths."""

    fixed_us: float
    rate_gbs: float
    points: int
    worst_residual_pct: float  # the largest |measured - line| / measured among the points
    read_pct: float | None = None  # the rate in % of the machine's measured read bandwidth

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "poor": self.poor}

    @property
    def poor(self) -> bool:
        return self.worst_residual_pct > POOR_FIT_PCT


def fit_run(run: Any, points: Sequence[Any]) -> StreamingFit:
    """A stored decode run's ``points`` fitted (a :class:`workbench.store.RunRecord` and its
    :class:`~workbench.store.PointRecord` s); ValueError as :func:`fit_streaming`."""
    sizes = [(run.point_problem(p).kv_bytes(), p.latency_ms) for p in points]
    return fit_streaming(sizes, run.machine)


def plain_read_ms(run: Any, points: Sequence[Any]) -> dict[int, float]:
    """Length → how long this machine's plain read of the point's K+V bytes takes (ms), from
    the read line in the run's machine record (``bandwidth``: fixed + bytes / rate): the floor
    a decode point is drawn against. Empty for a prefill run or a machine never measured."""
    line = read_line(run.machine)
    if line is None or run.axis != K_LEN_AXIS:
        return {}
    fixed_us, rate_gbs = line
    return {
        p.seq_len: (fixed_us + run.point_problem(p).kv_bytes() / (rate_gbs * 1e3)) / 1e3
        for p in points
    }


def wants_a_fit(lengths: int) -> bool:
    """Whether a run's missing fit is worth a line: not where it was measured at one length
    (a line through one point was never in reach, and every such decode group said so)."""
    return lengths > 1


def summary(fit: StreamingFit) -> str:
    """``7.5 µs + 4470 GB/s (98 % of read)``, and whether the points lie on the line."""
    read = f" ({fit.read_pct:.0f} % of read)" if fit.read_pct is not None else ""
    poor = f", not a line (a point {fit.worst_residual_pct:.1f} % off)" if fit.poor else ""
    return f"{fit.fixed_us:.1f} µs + {fit.rate_gbs:.0f} GB/s{read}{poor}"


def fit_streaming(
    bytes_and_ms: Sequence[tuple[int, float]],
    machine: Mapping[str, Any] | None = None,
    unit: str = "length",
    of: str = "with K+V",
) -> StreamingFit:
    """The least-squares line through the ``(K+V bytes, latency ms)`` points past
    :data:`COLD_KV_BYTES`. ValueError, with the reason in one line, where there is no line to
    fit: fewer than :data:`MIN_FIT_POINTS` sizes past it ("2 lengths with K+V past …": ``unit``
    and ``of`` name them), or latency not growing with bytes."""
    cold = sorted((b, ms) for b, ms in bytes_and_ms if b >= COLD_KV_BYTES and ms and ms > 0)
    sizes = {b for b, _ in cold}
    if len(sizes) < MIN_FIT_POINTS:
        counted = f"{len(sizes)} {unit}{'' if len(sizes) == 1 else 's'}"
        raise ValueError(
            " ".join(filter(None, (counted, of)))
            + f" past {COLD_KV_BYTES // 10**6} MB (twice the L2); a fit needs {MIN_FIT_POINTS}"
        )
    x = np.array([b for b, _ in cold], dtype=float)
    y = np.array([ms * 1e3 for _, ms in cold])  # µs
    slope, intercept = np.polyfit(x, y, 1)  # µs a byte, µs
    if slope <= 0:
        raise ValueError("latency does not grow with the bytes read: no streaming rate")
    rate_gbs = 1e-3 / slope  # bytes a µs / 1e3 = GB/s
    residual = float(np.max(np.abs(y - (slope * x + intercept)) / y)) * 100.0
    return StreamingFit(
        fixed_us=float(intercept),
        rate_gbs=float(rate_gbs),
        points=len(cold),
        worst_residual_pct=residual,
        read_pct=read_fraction_pct(rate_gbs, machine or {}),
    )
