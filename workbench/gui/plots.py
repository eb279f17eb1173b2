"""Latency and TFLOP/s against sequence length, one colour per run, with a p20–p80 band.

Items are created once per run and updated with ``setData`` (the pyqtgraph habit), so a live sweep
redraws only what changed. The x axis carries log2(N) as plain numbers and labels its integer ticks
as sequence lengths: pyqtgraph's own log mode is base 10, labels 10^x, and is ignored by some items.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from pyqtgraph.exporters import ImageExporter
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPointF, Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from workbench.gui.colors import run_color, run_style, with_alpha
from workbench.gui.plot_axes import Log2Axis, PlainLogAxis
from workbench.gui.plot_view import frame_plots
from workbench.safe_write import write_bytes_safely

# The right plot's measures: (shown, key).
THROUGHPUT_CHOICES = (("TFLOP/s", "tflops"), ("GB/s", "kv_gbs"))
# The dashed floor of decode runs: this GPU's one-launch read of the same bytes.
READ_LINE_NAME = "plain read of K+V (this GPU)"

# A fully transparent pen: FillBetweenItem draws nothing for curves plotted with pen=None
# (docs/design.md trap), so the band's edge curves get this instead.
_INVISIBLE_PEN = pg.mkPen(0, 0, 0, 0)


@dataclass
class Series:
    """What the plots need of one run: its id, a legend name and its points."""

    run_id: int
    name: str
    points: list[Any] = field(default_factory=list)  # workbench.store.PointRecord
    # Sequence length → the launch the autotuner chose there
    # (workbench.analysis.tuned.tuned_labels); empty for a run that was not autotuned, whose form
    # config is what ran.
    tuned: dict[int, str] = field(default_factory=dict)
    axis: str = "seq_len"  # what the lengths are: N, or k_len (a decode sweep)
    ragged: bool = False  # a ragged batch: each length is the batch's longest sequence
    # Length → GB/s of K+V (RunRecord.bandwidth): the throughput plot's other measure.
    kv_gbs: dict[int, float] = field(default_factory=dict)
    # Sequence length → % of the roofline ceiling bounding the point (empty without ceilings:
    # ``no_roofline`` says why) and what a cuTile point compiled to ("168r", "255r spill 5.5KB").
    pct_of_roofline: dict[int, float] = field(default_factory=dict)
    no_roofline: str = ""
    compiled: dict[int, str] = field(default_factory=dict)
    # Length → how long this GPU's plain read of the point's K+V takes (ms;
    # workbench.analysis.streaming.plain_read_ms): a decode run's floor. Empty where not measured.
    read_ms: dict[int, float] = field(default_factory=dict)

    def read_gbs(self, seq_len: int) -> float | None:
        """The plain read's GB/s at ``seq_len``: the same bytes over the read's time."""
        point = next((p for p in self.points if p.seq_len == seq_len), None)
        gbs, read = self.kv_gbs.get(seq_len), self.read_ms.get(seq_len)
        if point is None or gbs is None or not read:
            return None
        return gbs * point.latency_ms / read


@dataclass
class _Curves:
    """The items of one run in one plot."""

    line: pg.PlotDataItem
    low: pg.PlotDataItem
    high: pg.PlotDataItem
    band: pg.FillBetweenItem


class PlotsPanel(QWidget):
    """Two linked plots (latency, TFLOP/s), a legend in each, a cursor readout and PNG export."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        self.latency_plot = self._make_plot("Latency", "median latency", "ms")
        self.tflops_plot = self._make_plot("Throughput", "TFLOP/s", "")
        self.canvas.addItem(self.latency_plot, row=0, col=0)
        self.canvas.addItem(self.tflops_plot, row=0, col=1)
        # One legend below both plots, never on them (throughput flattens out at the top, and
        # the latency legend covered the short lengths' points): both plots draw the same runs
        # in the same colours.
        self.legend = pg.LegendItem(labelTextColor="#222", colCount=3)
        self.canvas.addItem(self.legend, row=1, col=0, colspan=2)
        self.latency_plot.legend = self.tflops_plot.legend = self.legend
        self.tflops_plot.setXLink(self.latency_plot)

        # Decode is bound by reading K and V: its throughput reads better as bytes a second.
        self.throughput = QComboBox()
        self.throughput.setObjectName("plot_throughput")
        for text, key in THROUGHPUT_CHOICES:
            self.throughput.addItem(text, key)
        self.throughput.setToolTip(
            "The right plot's measure: TFLOP/s, or GB/s of K and V (each byte read once: "
            "2·B·Hkv·k_len·D·itemsize over the median), which a memory-bound decode is read by"
        )
        self.throughput.currentIndexChanged.connect(self._on_throughput_changed)
        self.log_latency = QCheckBox("Log latency axis")
        self.log_latency.setChecked(True)
        self.log_latency.toggled.connect(self._on_log_toggled)
        self.latency_plot.setLogMode(x=False, y=True)

        self.readout = QLabel("Move the cursor over a plot to read values")
        self.readout.setObjectName("plot_readout")
        self.readout.setTextFormat(Qt.TextFormat.RichText)
        self.readout.setWordWrap(True)
        self.readout.setMinimumHeight(36)
        self.readout.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)

        bar = QHBoxLayout()
        bar.addWidget(self.readout, 1)
        bar.addWidget(self.throughput, 0, Qt.AlignmentFlag.AlignTop)
        bar.addWidget(self.log_latency, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas, 1)
        layout.addLayout(bar)

        self._series: dict[int, Series] = {}
        self._curves: dict[int, tuple[_Curves, _Curves]] = {}
        self._legend_order: list[int] = []
        # A decode run's floor, dashed: this GPU's plain read of the same bytes (the first
        # shown run that carries one; the runs of one group share it).
        pen = pg.mkPen("#555", width=1.5, style=Qt.PenStyle.DashLine)
        self.read_lines = (pg.PlotDataItem(pen=pen), pg.PlotDataItem(pen=pen))
        for plot, item in zip((self.latency_plot, self.tflops_plot), self.read_lines, strict=True):
            item.setVisible(False)
            plot.addItem(item)
        self._cursor_lines = []
        for plot in (self.latency_plot, self.tflops_plot):
            line = pg.InfiniteLine(
                angle=90, movable=False, pen=pg.mkPen("#888", style=Qt.PenStyle.DashLine)
            )
            line.setVisible(False)
            plot.addItem(line, ignoreBounds=True)
            self._cursor_lines.append(line)
        # Bound method, GUI thread: the scene reports every mouse move over either plot.
        self.canvas.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.cursor_seq_len: int | None = None
        self._framed = True
        self._frame()

    def _make_plot(self, title: str, y_label: str, y_units: str) -> pg.PlotItem:
        plot = pg.PlotItem(
            axisItems={
                "bottom": Log2Axis(orientation="bottom"),
                "left": PlainLogAxis(orientation="left"),
            }
        )
        plot.setTitle(title, color="#222", size="11pt")
        plot.setLabel("bottom", "sequence length N", color="#222")
        plot.setLabel("left", y_label, units=y_units or None, color="#222")
        plot.showGrid(x=True, y=True, alpha=0.2)
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            axis.setPen(pg.mkPen("#444"))
            axis.setTextPen(pg.mkPen("#222"))
        # Latency-only units prefixes would turn "ms" into "kms"; plain numbers read better.
        plot.getAxis("left").enableAutoSIPrefix(False)
        plot.setMouseEnabled(x=True, y=True)
        return plot

    # ---- data -----------------------------------------------------------------------------------
    def set_series(self, series: Sequence[Series]) -> None:
        """Show exactly these runs: new runs get items, gone runs lose theirs, others update."""
        wanted = {s.run_id: s for s in series}
        for run_id in list(self._curves):
            if run_id not in wanted:
                self._remove(run_id)
        added = [s.run_id for s in series if s.run_id not in self._curves]
        for s in series:
            self.update_series(s)
        if added or len(wanted) != len(self._legend_order):
            self._sort_legends()
        self._label_x()
        self._frame()
        self._refresh_readout()

    def _frame(self) -> None:
        """A fixed frame while there are no points or one length (:mod:`.plot_view`)."""
        data = [curves[1].line.getOriginalDataset() for curves in self._curves.values()]
        xs = [x for d in data if d[0] is not None for x in d[0]]
        ys = [y for d in data if d[1] is not None for y in d[1]]
        self._framed = frame_plots(self.latency_plot, self.tflops_plot, xs, ys, self._framed)

    def _decode(self) -> bool:
        """Do the shown runs all sweep k_len (decode)? Then the x axis is the key length."""
        return bool(self._series) and all(s.axis == "k_len" for s in self._series.values())

    def _label_x(self) -> None:
        text = "key length k_len" if self._decode() else "sequence length N"
        if self._series and all(s.ragged for s in self._series.values()):
            # docs/serving.md: a ragged batch is scaled so its longest sequence has that length.
            text = "longest sequence's " + text
        for plot in (self.latency_plot, self.tflops_plot):
            plot.setLabel("bottom", text, color="#222")

    def _on_throughput_changed(self) -> None:
        gbs = self.throughput.currentData() == "kv_gbs"
        self.tflops_plot.setTitle("Bandwidth" if gbs else "Throughput", color="#222", size="11pt")
        self.tflops_plot.setLabel("left", "GB/s of K+V" if gbs else "TFLOP/s", color="#222")
        for series in list(self._series.values()):
            self.update_series(series)
        self._update_read_lines()

    def _sort_legends(self) -> None:
        """List runs by id, the order they were made, however the selection grew."""
        order = sorted(self._curves)
        self.legend.clear()
        self.legend.setColumnCount(min(max(len(order), 1), 3))
        for run_id in order:
            self.legend.addItem(self._curves[run_id][0].line, self._series[run_id].name)
        self._legend_order = order
        self._update_read_lines()  # its entry after the runs'

    def update_series(self, series: Series) -> None:
        """Add or update one run (a live sweep calls this after every point)."""
        old = self._series.get(series.run_id)
        self._series[series.run_id] = series
        if series.run_id not in self._curves:
            self._curves[series.run_id] = (
                self._add_curves(self.latency_plot, series),
                self._add_curves(self.tflops_plot, series),
            )
        elif old is not None and old.name != series.name:
            line = self._curves[series.run_id][0].line
            self.legend.removeItem(line)
            self.legend.addItem(line, series.name)
        lat, tfl = self._curves[series.run_id]
        points = sorted(series.points, key=lambda p: p.seq_len)
        x = np.array([math.log2(p.seq_len) for p in points], dtype=float)
        median = np.array([p.latency_ms for p in points], dtype=float)
        p20 = np.array([p.latency_p20_ms for p in points], dtype=float)
        p80 = np.array([p.latency_p80_ms for p in points], dtype=float)
        if self.throughput.currentData() == "kv_gbs":
            tflops = np.array([series.kv_gbs.get(p.seq_len, np.nan) for p in points], dtype=float)
        else:
            tflops = np.array([p.tflops for p in points], dtype=float)
        # The throughput band is the latency band seen through the same FLOP (or byte) count:
        # the slow (p80) samples give the low TFLOP/s edge.
        with np.errstate(divide="ignore", invalid="ignore"):
            t_low = np.where(p80 > 0, tflops * median / p80, tflops)
            t_high = np.where(p20 > 0, tflops * median / p20, tflops)
        lat.line.setData(x, median)
        lat.low.setData(x, p20)
        lat.high.setData(x, p80)
        tfl.line.setData(x, tflops)
        tfl.low.setData(x, t_low)
        tfl.high.setData(x, t_high)
        self._frame()
        self._update_read_lines()
        self._refresh_readout()

    def _read_source(self) -> Series | None:
        """The shown run whose plain read is drawn (decode runs only), if any has one."""
        if not self._decode():
            return None
        return next(
            (self._series[r] for r in sorted(self._series) if self._series[r].read_ms), None
        )

    def _update_read_lines(self) -> None:
        latency, throughput = self.read_lines
        source = self._read_source()
        lengths = sorted(source.read_ms) if source else []
        x = [math.log2(n) for n in lengths]
        if source:
            latency.setData(x, [source.read_ms[n] for n in lengths])
        gbs = [source.read_gbs(n) for n in lengths] if source else []
        in_gbs = self.throughput.currentData() == "kv_gbs" and all(v is not None for v in gbs)
        if source and in_gbs:
            throughput.setData(x, gbs)
        latency.setVisible(source is not None)
        throughput.setVisible(bool(source) and in_gbs)
        self.legend.removeItem(latency)
        if source is not None:
            self.legend.addItem(latency, READ_LINE_NAME)

    def _add_curves(self, plot: pg.PlotItem, series: Series) -> _Curves:
        style = run_style(series.run_id)
        color = style.color
        line = pg.PlotDataItem(
            pen=style.pen(),
            symbol=style.symbol,
            symbolSize=7,
            symbolBrush=color,
            symbolPen=pg.mkPen(color),
            name=series.name,
        )
        low = pg.PlotDataItem(pen=_INVISIBLE_PEN)
        high = pg.PlotDataItem(pen=_INVISIBLE_PEN)
        band = pg.FillBetweenItem(low, high, brush=pg.mkBrush(with_alpha(color, 60)))
        # Band below the line; the edge curves carry no name so the legend lists runs only.
        for item in (band, low, high, line):
            plot.addItem(item)
        return _Curves(line, low, high, band)

    def _remove(self, run_id: int) -> None:
        for plot, curves in zip(
            (self.latency_plot, self.tflops_plot), self._curves.pop(run_id), strict=True
        ):
            for item in (curves.band, curves.low, curves.high, curves.line):
                plot.removeItem(item)
        self._series.pop(run_id, None)
        self._update_read_lines()

    def clear(self) -> None:
        self.set_series([])

    def run_ids(self) -> list[int]:
        return list(self._curves)

    # ---- readout --------------------------------------------------------------------------------
    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        for plot in (self.latency_plot, self.tflops_plot):
            box = plot.getViewBox()
            if box.sceneBoundingRect().contains(scene_pos):
                self.show_readout_at(box.mapSceneToView(scene_pos).x())
                return

    def show_readout_at(self, x_log2: float) -> None:
        """Point the readout at the measured length nearest to log2(N) = ``x_log2``."""
        lengths = sorted({p.seq_len for s in self._series.values() for p in s.points})
        if not lengths:
            self.cursor_seq_len = None
            self._refresh_readout()
            return
        nearest = min(lengths, key=lambda n: abs(math.log2(n) - x_log2))
        self.cursor_seq_len = nearest if abs(math.log2(nearest) - x_log2) <= 0.5 else None
        self._refresh_readout()

    def _refresh_readout(self) -> None:
        lengths = {p.seq_len for s in self._series.values() for p in s.points}
        if self.cursor_seq_len not in lengths:
            self.cursor_seq_len = None  # the runs now shown have no point there: not stale
        n = self.cursor_seq_len
        for line in self._cursor_lines:
            line.setVisible(n is not None)
            if n is not None:
                line.setValue(math.log2(n))
        self.readout.setText(self.readout_html(n) if n is not None else self._idle_text())

    def _idle_text(self) -> str:
        if not self._series:
            return "Select runs in History (or press Run) to plot them."
        return "Move the cursor over a plot to read values."

    def readout_html(self, seq_len: int) -> str:
        """Every shown run's values at ``seq_len``, each in its run's colour."""
        x = "k_len" if self._decode() else "N"
        parts = [f"<b>{x}&nbsp;=&nbsp;{seq_len:,}</b>"]
        for run_id in sorted(self._series):
            s = self._series[run_id]
            point = next((p for p in s.points if p.seq_len == seq_len), None)
            if point is None:
                continue
            color = run_color(s.run_id).name()
            entry = (
                f"{escape(s.name)}: {point.latency_ms:.4g} ms "
                f"(p20 {point.latency_p20_ms:.4g} – p80 {point.latency_p80_ms:.4g}), "
                f"{point.tflops:.4g} TFLOP/s"
            )
            gbs = s.kv_gbs.get(seq_len)
            if gbs is not None and (self._decode() or self.throughput.currentData() == "kv_gbs"):
                entry += f", {gbs:.4g} GB/s of K+V"
            if tuned := s.tuned.get(seq_len):
                entry += f", tuned {escape(tuned)}"
            pct = s.pct_of_roofline.get(seq_len)
            if pct is not None:
                entry += f", {pct:.0f} % of roofline"
            if compiled := s.compiled.get(seq_len):
                entry += f", {escape(compiled)}"
            # Non-breaking inside an entry: a long readout wraps between runs, not mid-value.
            parts.append(
                f"<span style='color:{color}'>■</span>&nbsp;{entry.replace(' ', '&nbsp;')}"
            )
        source = self._read_source()
        if source is not None and seq_len in source.read_ms:
            gbs = source.read_gbs(seq_len)
            read = f"{READ_LINE_NAME}: {source.read_ms[seq_len]:.4g} ms"
            read += f", {gbs:.4g} GB/s" if gbs is not None else ""
            parts.append(f"<span style='color:#555'>┅</span>&nbsp;{read.replace(' ', '&nbsp;')}")
        reasons = dict.fromkeys(
            s.no_roofline for s in self._series.values() if s.no_roofline and s.points
        )
        text = " &nbsp; ".join(parts)
        if reasons:
            text += "<br><i>" + escape("; ".join(reasons)) + "</i>"
        return text

    def _on_log_toggled(self, on: bool) -> None:
        self.latency_plot.setLogMode(x=False, y=on)
        self._frame()  # an empty frame's latency span is in the new scale's terms

    # ---- export ---------------------------------------------------------------------------------
    def export_png(
        self, path: str | Path, width: int = 1600, *, protected: Sequence[Path] = ()
    ) -> Path:
        """Both plots as one PNG (ImageExporter: the SVG exporter of pyqtgraph 0.14.0 is broken),
        written as :mod:`workbench.safe_write` writes any file (never onto ``protected``)."""
        exporter = ImageExporter(self.canvas.ci)
        exporter.parameters()["width"] = int(width)
        target = Path(path)
        if target.suffix.lower() != ".png":
            target = target.with_suffix(".png")
        image = exporter.export(toBytes=True)
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        if not image.save(buffer, "PNG"):
            raise OSError(f"the plots could not be encoded as PNG for {target}")
        buffer.close()
        write_bytes_safely(target, bytes(data.data()), protected=protected)
        return target
