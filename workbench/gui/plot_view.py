"""The Plots tab's axes when there is little to show: no points, or points at one length.

pyqtgraph's auto-range of an empty plot spans ±0.015 around 0 (negative TFLOP/s) and puts
"1 1 1 2 4" on a log2 axis (every negative exponent clamped to N = 1); one length gets an
x span that hides its own tick's label. Neither says anything, so
these plots get a fixed frame instead, and auto-range again once two lengths are measured.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pyqtgraph as pg

# The frame of an empty plot: N from 64 to 16k, 0.01 to 10 ms, 0 to 1 TFLOP/s (or GB/s).
EMPTY_LOG2_N = (6.0, 14.0)
EMPTY_LOG10_MS = (-2.0, 1.0)
EMPTY_MS = (0.0, 1.0)
EMPTY_THROUGHPUT = (0.0, 1.0)
# One length: a little over half an octave either side, so its own tick is the one in view.
ONE_LENGTH_OCTAVES = 0.6
HEADROOM = 1.15  # above the highest throughput, so its marker is not cut by the frame


def frame_plots(
    latency_plot: pg.PlotItem,
    throughput_plot: pg.PlotItem,
    log2_lengths: Iterable[float],
    throughputs: Iterable[float],
    framed: bool,
) -> bool:
    """Fix both plots' frames for no points or one length, and return True; otherwise turn
    auto-range back on if the frame was fixed (``framed``), leaving a zoom the user made
    alone, and return False. Throughput is never shown below 0 (the plots share x)."""
    xs = sorted({x for x in log2_lengths if math.isfinite(x)})
    ys = [y for y in throughputs if math.isfinite(y)]
    throughput_plot.getViewBox().setLimits(yMin=0.0)
    if len(xs) >= 2:
        if framed:
            for plot in (latency_plot, throughput_plot):
                plot.enableAutoRange()
        return False
    if not xs:
        log_y = latency_plot.getViewBox().state["logMode"][1]
        latency_plot.setRange(
            xRange=EMPTY_LOG2_N, yRange=EMPTY_LOG10_MS if log_y else EMPTY_MS, padding=0
        )
        throughput_plot.setRange(yRange=EMPTY_THROUGHPUT, padding=0)
        return True
    x = xs[0]
    latency_plot.setXRange(x - ONE_LENGTH_OCTAVES, x + ONE_LENGTH_OCTAVES, padding=0)
    latency_plot.enableAutoRange(axis="y")
    top = max(ys, default=0.0)
    throughput_plot.setYRange(0.0, top * HEADROOM if top > 0 else 1.0, padding=0)
    return True
