"""The plots' axes: sequence lengths on a log2 axis labelled as N (64, 1k, 16k), and log axes
labelled with plain round numbers, fine enough that a narrow span still shows two labels."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import pyqtgraph as pg


def format_seq_len(n: float) -> str:
    """1024 → "1k", 65536 → "64k", 1048576 → "1M", 96 → "96"."""
    n = round(n)
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10}k"
    return str(n)


class Log2Axis(pg.AxisItem):
    """An x axis whose values are log2(N), ticked at powers of two and labelled as N."""

    def tickValues(
        self, minVal: float, maxVal: float, size: float
    ) -> list[tuple[float, list[float]]]:
        lo, hi = math.ceil(minVal), math.floor(maxVal)  # the ticks in view
        if hi < lo:
            return []
        # About 45 px per label keeps "16k" and "32k" from overlapping on a narrow plot.
        count = hi - lo + 1
        step = max(1, math.ceil(count / max(size / 45.0, 1.0)))
        # No ticks below N = 1: each would read "1" again.
        major = [float(v) for v in range(max(lo, 0), hi + 1) if v % step == 0]
        return [(float(step), major)]

    def tickStrings(self, values: Sequence[float], scale: float, spacing: float) -> list[str]:
        # Large exponents would overflow; the axis never needs more than 2^40 anyway.
        return [format_seq_len(2.0 ** min(max(v, 0.0), 40.0)) for v in values]


def format_axis_number(x: float) -> str:
    """0.05 → "0.05", 200 → "200", 20000 → "20,000": latencies read as plain numbers."""
    if x >= 1:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _round_mantissa(x: float, mantissas: Sequence[float] = (1.0, 2.0, 5.0)) -> bool:
    """Is ``x`` one of ``mantissas`` (1, 2 or 5) times a power of ten?"""
    if x <= 0 or not math.isfinite(x):
        return False
    mantissa = x / 10.0 ** math.floor(math.log10(x) + 1e-9)
    return any(abs(mantissa - m) < 1e-6 * m for m in mantissas)


def fine_ticks(lo: float, hi: float) -> list[float]:
    """Evenly spaced round values (a 1, 2 or 5 times a power of ten apart) from ``lo`` to
    ``hi``, at least three where the range allows: a log axis over a span narrower than its
    1…9 ticks (1.1 to 1.9 ms) otherwise had one label or none."""
    if not (0 < lo < hi) or not math.isfinite(hi):
        return []
    for power in range(math.floor(math.log10(hi - lo)), math.floor(math.log10(hi - lo)) - 3, -1):
        for mantissa in (5.0, 2.0, 1.0):
            step = mantissa * 10.0**power
            first = math.ceil(lo / step - 1e-9)
            values = [k * step for k in range(first, math.floor(hi / step + 1e-9) + 1)]
            if len(values) >= 3:
                return values
    return []


class PlainLogAxis(pg.AxisItem):
    """A log axis labelled 1, 2, 5, 10, 20…: pyqtgraph's default writes 2·10¹ and labels
    every minor tick, which crowds a latency axis spanning several decades; over a narrow
    span it ticks at finer round values, so two labels or more are always in view."""

    def tickValues(
        self, minVal: float, maxVal: float, size: float
    ) -> list[tuple[float | None, list[float]]]:
        levels = super().tickValues(minVal, maxVal, size)
        if not self.logMode:
            return levels
        lo, hi = sorted((minVal, maxVal))
        inside = {round(v, 9) for _, values in levels for v in values if lo <= v <= hi}
        if len(inside) >= 2:
            return levels
        fine = fine_ticks(10.0**lo, 10.0**hi)
        return [(None, [math.log10(x) for x in fine])] if fine else levels

    def logTickStrings(self, values: Sequence[float], scale: float, spacing: float) -> list[str]:
        xs = [10.0 ** float(v) * scale for v in values]
        every = [format_axis_number(x) if x > 0 and math.isfinite(x) else "" for x in xs]
        labels = [text if _round_mantissa(x) else "" for x, text in zip(xs, every, strict=True)]
        if sum(map(bool, labels)) == 2:
            # Two labels a decade apart or less (0.5 and 1) leave a point between them unread
            # (a one-point decode run at 0.33 ms): 3 and 4 are labelled too, which the log
            # scale spaces as far apart as 1, 2 and 5.
            finer = (1.0, 2.0, 3.0, 4.0, 5.0)
            labels = [
                text if _round_mantissa(x, finer) else "" for x, text in zip(xs, every, strict=True)
            ]
        if sum(map(bool, labels)) >= 2:
            return labels
        # Less than a decade in view holds one 1, 2 or 5 or none: label every tick, with the
        # digits that tell neighbours apart (1.2 and 1.4, not "1" twice).
        finite = sorted(x for x in xs if x > 0 and math.isfinite(x))
        gaps = [b - a for a, b in itertools.pairwise(finite) if b > a]
        if not gaps:
            return every
        decimals = max(0, -math.floor(math.log10(min(gaps)) + 1e-9))
        return [f"{x:,.{decimals}f}" if x > 0 and math.isfinite(x) else "" for x in xs]
