"""The ladder's chart: each length's speed-up against the baseline, step by step."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from workbench.gui.plot_axes import format_seq_len
from workbench.jobs.ladder_steps import LadderData

EMPTY_CHART_STEPS = 7  # the built-in ladders' steps: the empty chart's axis
LEGEND_COLUMNS = 3  # more, and the legend widened the chart past its pane


class LadderChart(pg.GraphicsLayoutWidget):
    """One curve per sequence length over the steps, the legend below, a dashed × 1 line."""

    def __init__(self) -> None:
        super().__init__()
        self.setBackground("w")
        self.setObjectName("ladder_chart")
        self.plot = pg.PlotItem()
        self.addItem(self.plot, row=0, col=0)
        self.plot.setTitle("Speed-up against the baseline", color="#222", size="10pt")
        self.plot.setLabel("bottom", "step (numbered as in the table)", color="#222")
        self.plot.setLabel("left", "× baseline", color="#222")
        self.plot.showGrid(x=False, y=True, alpha=0.25)
        for name in ("left", "bottom"):
            axis = self.plot.getAxis(name)
            axis.setPen(pg.mkPen("#444"))
            axis.setTextPen(pg.mkPen("#222"))
        self.plot.setMenuEnabled(False)
        # Below the plot: at the top it covered the best steps' points.
        self.legend = pg.LegendItem(labelTextColor="#222", colCount=3)
        self.addItem(self.legend, row=1, col=0)
        self.unity = pg.InfiniteLine(
            pos=1.0, angle=0, movable=False, pen=pg.mkPen("#888", style=Qt.PenStyle.DashLine)
        )
        self.plot.addItem(self.unity, ignoreBounds=True)
        self._curves: dict[int, pg.PlotDataItem] = {}

    def show_ladder(self, data: LadderData | None) -> None:
        """Draw ``data``'s ratios (None: an empty chart with the built-in ladder's axis)."""
        wanted = data.seq_lens if data is not None else []
        for n in list(self._curves):
            if n not in wanted:
                self.plot.removeItem(self._curves.pop(n))
        self.legend.clear()
        self.legend.setColumnCount(min(max(len(wanted), 1), LEGEND_COLUMNS))
        if data is None:
            # The built-in ladder's steps on a whole-number axis (not 0.1-0.9) and × 1 in view.
            steps = range(1, EMPTY_CHART_STEPS + 1)
            self.plot.getAxis("bottom").setTicks([[(float(v), str(v)) for v in steps]])
            self.plot.setXRange(0.5, EMPTY_CHART_STEPS + 0.5, padding=0)
            self.plot.setYRange(0.0, 2.0, padding=0)
            return
        colormap = pg.colormap.get("viridis")
        x = np.arange(1, len(data.rows) + 1, dtype=float)
        for i, n in enumerate(data.seq_lens):
            # Short to long along viridis, stopping before its pale yellow end.
            share = 0.85 * i / max(len(data.seq_lens) - 1, 1)
            color = colormap.map(share, mode="qcolor")
            curve = self._curves.get(n)
            if curve is None:
                curve = pg.PlotDataItem(connect="finite")
                self.plot.addItem(curve)
                self._curves[n] = curve
            curve.setPen(pg.mkPen(color, width=2))
            curve.setSymbol("o")
            curve.setSymbolSize(7)
            curve.setSymbolBrush(color)
            curve.setSymbolPen(pg.mkPen(color))
            y = np.array(data.ratios(n), dtype=float)
            if np.isfinite(y).any():
                curve.setData(x, y)  # NaN gaps break the line (connect="finite")
            else:
                curve.setData([], [])  # nothing measured yet at this length
            self.legend.addItem(curve, f"N = {format_seq_len(n)}")
        self.plot.getAxis("bottom").setTicks([[(float(v), str(int(v))) for v in x]])
        self.plot.setXRange(0.5, len(data.rows) + 0.5, padding=0)
        finite = [v for n in data.seq_lens for v in data.ratios(n) if math.isfinite(v)]
        lo, hi = (min([*finite, 1.0]), max([*finite, 1.0])) if finite else (0.5, 1.5)
        pad = max(0.05, 0.08 * (hi - lo))
        self.plot.setYRange(max(lo - pad, 0.0), hi + pad, padding=0)
