"""Compare as a picture: each run's speed-up over the baseline against sequence length.

x is log2 N (labelled as N, like the Plots tab), y is the speed-up × (baseline latency / run
latency, the CLI's ``speedup_vs_base``), with a dashed line at 1. Around each curve its noise
band (:meth:`workbench.analysis.compare.Cell.speedup_band`): the band covers 1 exactly where the
table marks the difference "~", within the runs' own noise.

Items are created once per run and updated with ``setData``. The band's edge curves get a
transparent pen: FillBetweenItem draws nothing for curves plotted with ``pen=None``
(docs/design.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from workbench.analysis.compare import Cell
from workbench.gui.colors import run_style, with_alpha
from workbench.gui.plot_axes import Log2Axis

_INVISIBLE_PEN = pg.mkPen(0, 0, 0, 0)
Y_LABEL = "× baseline"  # the ladder chart's words; "speed-up × vs baseline" was cut


@dataclass
class _Curve:
    line: pg.PlotDataItem
    low: pg.PlotCurveItem
    high: pg.PlotCurveItem
    band: pg.FillBetweenItem


class CompareChart(QWidget):
    """Speed-up against the baseline per N, one curve and band per non-baseline run."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot_widget = pg.GraphicsLayoutWidget()
        self.plot_widget.setObjectName("compare_chart")
        self.plot_widget.setBackground("w")
        plot = pg.PlotItem(axisItems={"bottom": Log2Axis(orientation="bottom")})
        self._plot = plot
        self.plot_widget.addItem(plot, row=0, col=0)
        plot.showGrid(x=True, y=True, alpha=0.25)
        plot.setLabel("bottom", "sequence length N")
        plot.setLabel("left", Y_LABEL)
        plot.setMenuEnabled(False)
        # Below the plot, not on it: the curves of a slower run ran under its corner.
        self.legend = pg.LegendItem(labelTextColor="#222", colCount=3)
        self.plot_widget.addItem(self.legend, row=1, col=0)
        # Created once; the baseline's own level: above it faster, below slower.
        self.unity = pg.InfiniteLine(
            pos=1.0, angle=0, pen=pg.mkPen("#555555", width=1, style=Qt.PenStyle.DashLine)
        )
        plot.addItem(self.unity)
        self._curves: dict[int, _Curve] = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot_widget)

    @property
    def plot(self) -> pg.PlotItem:
        return self._plot

    def set_rows(
        self,
        rows: Sequence[tuple[int, dict[int, Cell]]],
        others: Sequence[Any],
        names: dict[int, str],
    ) -> None:
        """``rows`` from :func:`workbench.analysis.compare.compare_table`; ``others`` the
        non-baseline runs (RunRecord) to draw; ``names`` their legend text."""
        decode = bool(others) and all(getattr(r, "axis", "seq_len") == "k_len" for r in others)
        label = "key length k_len" if decode else "sequence length N"
        self.plot.setLabel("bottom", label)
        keep = {run.id for run in others}
        for run_id in [r for r in self._curves if r not in keep]:
            self._remove(run_id)
        for run in others:
            xs, ys, lows, highs = [], [], [], []
            for n, cells in rows:
                cell = cells.get(run.id)
                band = cell.speedup_band() if cell is not None else None
                if cell is None or cell.speedup is None or band is None:
                    continue
                xs.append(math.log2(n))
                ys.append(cell.speedup)
                lows.append(band[0])
                highs.append(band[1])
            self._draw(run.id, names.get(run.id, f"#{run.id}"), xs, ys, lows, highs)

    def _draw(
        self,
        run_id: int,
        name: str,
        xs: list[float],
        ys: list[float],
        lows: list[float],
        highs: list[float],
    ) -> None:
        x = np.asarray(xs, dtype=float)
        y = np.asarray(ys, dtype=float)
        # A band open above (a noise as the latency ratio) is drawn to the top of
        # the curves, not to infinity.
        cap = 2.0 * max(float(y.max()) if y.size else 1.0, 1.0)
        low = np.asarray(lows, dtype=float)
        high = np.minimum(np.asarray(highs, dtype=float), cap)
        curve = self._curves.get(run_id)
        style = run_style(run_id)
        color = style.color
        if curve is None:
            line = pg.PlotDataItem(
                pen=style.pen(), symbol=style.symbol, symbolSize=7, symbolBrush=color
            )
            low_item = pg.PlotCurveItem(pen=_INVISIBLE_PEN)
            high_item = pg.PlotCurveItem(pen=_INVISIBLE_PEN)
            band = pg.FillBetweenItem(low_item, high_item, brush=pg.mkBrush(with_alpha(color, 50)))
            for item in (band, low_item, high_item):
                self.plot.addItem(item)
            self.plot.addItem(line)
            curve = self._curves[run_id] = _Curve(line, low_item, high_item, band)
        curve.line.setData(x, y)
        curve.low.setData(x, low)
        curve.high.setData(x, high)
        # One point has no band to fill, and the empty fill's bounds at the origin stretched
        # the x axis to N = 1 (a one-length decode group read "1 2 4 … 32k").
        for item in (curve.band, curve.low, curve.high):
            item.setVisible(x.size > 1)
        self.legend.removeItem(curve.line)
        self.legend.addItem(curve.line, name)

    def _remove(self, run_id: int) -> None:
        curve = self._curves.pop(run_id)
        self.legend.removeItem(curve.line)
        for item in (curve.line, curve.low, curve.high, curve.band):
            self.plot.removeItem(item)

    def run_ids(self) -> list[int]:
        return list(self._curves)
