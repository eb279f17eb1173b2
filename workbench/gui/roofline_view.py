"""The Roofline view: the selected runs' points against this machine's measured ceilings.

Log–log: x is arithmetic intensity (FLOP per byte moved at least), y is TFLOP/s. The two
ceilings of the runs' GPU (:func:`workbench.analysis.compare.roofline_points`, from the database's
machine record) are lines: the memory roof rises with intensity at the read bandwidth, the
compute roof is flat at the dense matmul rate, and they meet at the ridge. Each run's points
are one scatter, its colour as in the other views; hovering a point shows its run, config, N,
intensity, TFLOP/s and % of the ceiling that bounds it. Without a record (or on the CPU) the
points are still drawn and the caption says why there are no ceilings.

pyqtgraph's log mode takes data in linear units and plots log10 of it; lines added with
``addLine`` ignore log mode (docs/design.md), so the roofs are PlotDataItems too.
"""

from __future__ import annotations

import math
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QLabel, QToolTip, QVBoxLayout, QWidget

from workbench.gui.colors import run_style
from workbench.gui.plot_axes import PlainLogAxis

# The intensities the roofs are drawn across (FLOP/byte): decode-like problems to long prefill.
X_RANGE = (0.1, 10_000.0)
HOVER_PX = 8.0  # how near the cursor a point must be to be described
HOVER_HINT = "Hover a point for its run, config, N, TFLOP/s and % of roofline."


class RooflineView(QWidget):
    """Ceilings as lines, runs as points, hover for the config."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # Decades and their 2s and 5s as plain numbers: the default log axis labels every
        # minor tick as 2·10¹, 3·10¹, … and they run together on a wide window.
        self.plot_widget = pg.GraphicsLayoutWidget()
        self._plot = pg.PlotItem(
            axisItems={
                "bottom": PlainLogAxis(orientation="bottom"),
                "left": PlainLogAxis(orientation="left"),
            }
        )
        self.plot_widget.addItem(self._plot, row=0, col=0)
        self.plot_widget.setObjectName("roofline_plot")
        self.plot_widget.setBackground("w")
        plot = self._plot
        plot.setLogMode(x=True, y=True)
        plot.showGrid(x=True, y=True, alpha=0.25)
        plot.setLabel("bottom", "arithmetic intensity (FLOP / byte moved at least)")
        plot.setLabel("left", "TFLOP/s")
        # Plain TFLOP/s, never "TFLOP/s (x0.001)" over a lone tick label.
        plot.getAxis("left").enableAutoSIPrefix(False)
        plot.setMenuEnabled(False)
        # Below the plot, not on it: a legend's marker among the points read as one more point.
        self.legend = pg.LegendItem(labelTextColor="#222", colCount=3)
        self.plot_widget.addItem(self.legend, row=1, col=0)
        pen = pg.mkPen("#333333", width=2)
        self.memory_roof = plot.plot([], [], pen=pen)
        self.compute_roof = plot.plot([], [], pen=pen)
        self.hover = QLabel(HOVER_HINT)
        self.hover.setObjectName("roofline_hover")
        self.hover.setWordWrap(True)
        self.plot_widget.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.caption = QLabel("Select runs in History to place their points.")
        self.caption.setObjectName("roofline_caption")
        self.caption.setWordWrap(True)
        self.caption.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.scatters: dict[int, pg.ScatterPlotItem] = {}  # run id -> its points
        self.data: dict[str, Any] | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.caption)
        layout.addWidget(self.plot_widget, 1)
        layout.addWidget(self.hover)

    @property
    def plot(self) -> pg.PlotItem:
        return self._plot

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        """The point under the cursor (within HOVER_PX) described below the plot and in a
        tooltip; pyqtgraph's own hover tip sat on the view box, where none showed."""
        best: tuple[float, str] | None = None
        for scatter in self.scatters.values():
            for spot in scatter.points():
                at = scatter.mapToScene(spot.pos())
                distance = math.hypot(at.x() - scene_pos.x(), at.y() - scene_pos.y())
                if distance <= HOVER_PX and (best is None or distance < best[0]):
                    best = (distance, str(spot.data()))
        if best is None:
            self.hover.setText(HOVER_HINT if self.scatters else "")
            QToolTip.hideText()
            return
        self.hover.setText(best[1].replace("\n", " · "))
        global_pos = self.plot_widget.mapToGlobal(self.plot_widget.mapFromScene(scene_pos))
        QToolTip.showText(global_pos, best[1], self.plot_widget)

    def set_data(self, data: dict[str, Any] | None) -> None:
        """``data`` from :func:`workbench.analysis.compare.roofline_points` (None: nothing
        selected); each run in its own colour and marker
        (:func:`workbench.gui.colors.run_style`)."""
        self.data = data
        for run_id in list(self.scatters):
            self.plot.removeItem(self.scatters.pop(run_id))
        self.legend.clear()
        if not data or not data["runs"]:
            self.memory_roof.setData([], [])
            self.compute_roof.setData([], [])
            self.caption.setText("Select runs in History to place their points.")
            return
        dtype = data["runs"][0]["dtype"]
        self._draw_roofs(data.get("ceilings"), dtype)
        for run in data["runs"]:
            style = run_style(run["run_id"])
            spots = [
                {
                    "pos": (math.log10(p["intensity"]), math.log10(p["tflops"])),
                    "data": self.point_tip(run, p),
                }
                for p in run["points"]
                if p["intensity"] > 0 and p["tflops"] > 0
            ]
            scatter = pg.ScatterPlotItem(
                spots=spots, size=10, brush=pg.mkBrush(style.color), pen=pg.mkPen("w"),
                symbol=style.symbol,
                hoverable=True, hoverSize=14, tip=None, name=run["name"],
            )  # fmt: skip
            self.plot.addItem(scatter)
            self.scatters[run["run_id"]] = scatter
        names = {run["run_id"]: run["name"] for run in data["runs"]}
        for run_id in sorted(self.scatters):  # oldest first, as the Plots legend lists them
            self.legend.addItem(self.scatters[run_id], names[run_id])
        self._span_a_decade()

    def _span_a_decade(self) -> None:
        """At least a decade of each log axis in view: points within a few % of each other
        (a CPU run's) would otherwise get one tick label or none; the roofs span decades."""
        self.plot.enableAutoRange()
        xs, ys = [], []
        for item in (*self.scatters.values(), self.memory_roof, self.compute_roof):
            x, y = item.getData()
            if x is not None and len(x):
                xs += list(x)
                ys += list(y)
        for values, set_range in ((xs, self.plot.setXRange), (ys, self.plot.setYRange)):
            if values and max(values) - min(values) < 1.0:
                middle = (max(values) + min(values)) / 2
                set_range(middle - 0.5, middle + 0.5, padding=0.05)

    def _draw_roofs(self, ceilings: dict[str, Any] | None, dtype: str) -> None:
        if not ceilings or dtype not in ceilings["matmul_tflops"]:
            self.memory_roof.setData([], [])
            self.compute_roof.setData([], [])
            reason = (self.data or {}).get("reason") or (f"the record has no {dtype} matmul rate")
            self.caption.setText(f"No ceilings: {reason}.")
            return
        peak = float(ceilings["matmul_tflops"][dtype])
        bandwidth = float(ceilings["read_gbs"])
        ridge = peak * 1e3 / bandwidth
        lo, hi = X_RANGE
        self.memory_roof.setData([lo, ridge], [lo * bandwidth / 1e3, peak])
        self.compute_roof.setData([ridge, hi], [peak, peak])
        self.caption.setText(
            f"Ceilings of {ceilings['gpu_name']}, measured {ceilings['measured_at']}: "
            f"{dtype} matmul {peak:g} TFLOP/s, read {bandwidth:g} GB/s (ridge at "
            f"{ridge:.0f} FLOP/byte). Hover a point for its config and % of roofline."
        )

    @staticmethod
    def point_tip(run: dict[str, Any], point: dict[str, Any]) -> str:
        """What a hover shows of one point."""
        pct = point.get("pct_of_roofline")
        lines = [
            run["name"],
            run["config"],
            f"N = {point['seq_len']}: {point['tflops']:.3g} TFLOP/s at "
            f"{point['intensity']:.1f} FLOP/byte",
            f"{pct:.0f} % of roofline" if pct is not None else "no % (no ceilings)",
        ]
        compiled = point.get("compiled")
        if compiled and not compiled.get("error"):
            spill = compiled.get("spill_bytes") or 0
            lines.append(
                f"{compiled['registers']} registers" + (f", spills {spill} B" if spill else "")
            )
        return "\n".join(lines)
