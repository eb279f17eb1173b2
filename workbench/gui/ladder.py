"""The ladder view: steps × sequence lengths, their speed-ups, a chart, each step's block map.

A ladder is a group of runs of kind 'ladder' (:mod:`workbench.ladder`): one run per step, each one
change on the previous step, all on the same inputs. What is shown is the core's
:func:`~workbench.ladder.read_ladder`; this module only lays it out. Steps that the group names
but that have no run (the ladder was cancelled, or a crash ended it) are listed as "not run"
("pending" while the ladder runs), and a length a step did not measure shows "–" with the run's
status, so a failed step can never pass for a slow one.

A cell's background is the core's :func:`~workbench.ladder.speedup_verdict` against the previous
step or the baseline (the user picks which). Clicking a step shows its block map beside the
chart, at the length of the clicked column (or the length the map already shows).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.compare import noise_rule
from workbench.config import MAX_LABEL_CHARS
from workbench.gui.compare import FASTER, SLOWER
from workbench.gui.heatmap import BlockLoader, HeatmapPanel
from workbench.gui.history import STATUS_COLORS, format_created, problem_summary
from workbench.gui.plots import format_seq_len
from workbench.ladder import GROUP_KIND as LADDER_GROUP_KIND
from workbench.ladder import (
    LADDER_PRESETS,
    NOT_RUN,
    PENDING,
    LadderData,
    StepRow,
    ladder_preset_text,
    read_ladder,
    speedup_verdict,
)
from workbench.resources import CompiledResources

GAIN = FASTER  # the Compare tab's green and red, so both views read alike
LOSS = SLOWER
MISSING = QColor("#eeeeee")
STATUS_TEXT_COLORS = {**STATUS_COLORS, NOT_RUN: QColor("#757575"), PENDING: QColor("#757575")}
# The combo says what a cell is coloured against on its own: a "Colour vs" label before it and
# a preset box wide enough for "model-inputs" widened the window's minimum past 790 px.
BASES = (("vs previous step", "vs_previous"), ("vs baseline", "vs_baseline"))
EMPTY_CHART_STEPS = 7  # the built-in ladders' steps: the empty chart's axis
LEGEND_COLUMNS = 3  # more, and the legend widened the chart past its pane
MAX_TABLE_HEIGHT = 420  # px: beyond about ten steps the table scrolls
MIN_CHART_HEIGHT = 240  # px left at least to the chart and the map when the table is fitted
FIRST_LEN_COL = 3  # Step, Status, Compiled, then one column per sequence length
CELL_ROLE = Qt.ItemDataRole.UserRole  # a length cell's ladder_table cell (dict) or None
VERDICT_ROLE = Qt.ItemDataRole.UserRole + 1  # "gain", "loss", "neutral" or "missing"


def format_ratio(ratio: float | None) -> str:
    return f"×{ratio:.2f}" if ratio is not None and math.isfinite(ratio) else "–"


def format_marked(cell: dict[str, Any], key: str) -> str:
    """``×1.16`` beyond the noise, ``×1.02~`` within it (Compare's mark), ``–`` for none."""
    ratio = cell.get(key)
    if ratio is None or not math.isfinite(ratio):
        return "–"
    return f"×{ratio:.2f}{'' if cell.get(f'{key}_significant') else '~'}"


def noise_text(cell: dict[str, Any], key: str) -> str:
    noise = cell.get(f"{key}_noise_pct")
    if noise is None:
        return ""
    within = "beyond" if cell.get(f"{key}_significant") else "within"
    return f" ({within} the noise of ±{noise:.1f} %)"


class LadderPanel(QWidget):
    """Stored-ladder picker, Run / Cancel / Export, the step table, the chart and a block map.

    Emits ``runRequested`` / ``cancelRequested`` / ``exportRequested(group_id)`` for the window,
    which owns the worker and the file dialogs; ``message`` is a line for the status bar.
    """

    runRequested = Signal()
    cancelRequested = Signal()
    exportRequested = Signal(int)
    message = Signal(str)

    def __init__(self, loader: BlockLoader, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store: Any = None
        self._live_group: int | None = None
        self._running = False
        self._can_run = True
        self._shown_row: int | None = None  # the step whose block map is shown
        self._user_sized = False  # the user dragged the table's splitter: leave it there
        self.data: LadderData | None = None

        self.picker = QComboBox()
        self.picker.setObjectName("ladder_picker")
        self.picker.setToolTip("Ladders stored in this database, newest first")
        self.picker.setMinimumContentsLength(16)
        self.picker.currentIndexChanged.connect(self._on_picked)
        self.basis = QComboBox()
        self.basis.setObjectName("ladder_basis")
        for text, key in BASES:
            self.basis.addItem(text, key)
        self.basis.setToolTip(
            "Each cell shows its ratio to this, and is coloured green for a speed-up and red "
            f"for a slow-down beyond the two points' noise ({noise_rule()}); ~ marks a ratio "
            "within it"
        )
        self.basis.currentIndexChanged.connect(self._on_basis_changed)
        self.run_button = QPushButton("Run ladder")
        self.run_button.setObjectName("ladder_run")
        self.run_button.setToolTip(
            "Run the built-in ladder (each step one change on the previous, causal mask) on the "
            "problem, sequence lengths and backend set in the form"
        )
        self.run_button.clicked.connect(self.runRequested)
        self._run_tip = self.run_button.toolTip()
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("ladder_cancel")
        self.cancel_button.setToolTip(
            "Stop now (the point in progress is dropped); the step's run is kept as cancelled "
            "and the steps after it are not run"
        )
        self.cancel_button.clicked.connect(self.cancelRequested)
        self.label_edit = QLineEdit()
        self.label_edit.setMaxLength(MAX_LABEL_CHARS)
        self.label_edit.setObjectName("ladder_label")
        self.label_edit.setPlaceholderText("label (optional)")
        self.label_edit.setToolTip(
            "A name for the next ladder; each step's run is labelled with it and the step name "
            "(the step name alone when empty)"
        )
        self.export_button = QPushButton("Export CSV…")
        self.export_button.setObjectName("ladder_export")
        self.export_button.setToolTip("Every point of this ladder's runs, one row each")
        self.export_button.clicked.connect(self._on_export_clicked)

        # Which built-in ladder Run ladder runs: this GPU's tile ladder, or one by name (the
        # decode ladder sweeps k_len at the form's q_len).
        self.preset = QComboBox()
        self.preset.setObjectName("ladder_preset")
        self.preset.addItem("this GPU's", None)
        for name in LADDER_PRESETS:
            self.preset.addItem(name, name)
        self.preset.setToolTip(
            "The built-in ladder Run ladder runs: this GPU's tile ladder, Hopper's, "
            "Blackwell's, or the decode ladder (baseline, GQA packing, KV split, autotuned) "
            "on a k_len form"
        )
        # As wide as its longest name: four characters showed "this GPU'".
        self.preset.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        # Two short rows rather than one long one: the tab must not widen the window's minimum.
        top = QHBoxLayout()
        top.addWidget(QLabel("Ladder"))
        top.addWidget(self.picker, 1)
        top.addWidget(self.run_button)
        top.addWidget(self.cancel_button)
        second = QHBoxLayout()
        second.addWidget(self.preset)
        second.addWidget(self.basis)
        second.addWidget(self.label_edit, 1)
        second.addWidget(self.export_button)

        self.info = QLabel()
        self.info.setObjectName("ladder_info")
        self.info.setWordWrap(True)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.table = QTableWidget()
        self.table.setObjectName("ladder_table")
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectItems)
        self.table.setWordWrap(False)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setStretchLastSection(False)
        # A translucent selection, so the selected cell keeps its gain/loss colour.
        palette = self.table.palette()
        palette.setColor(palette.ColorRole.Highlight, QColor(21, 101, 192, 70))
        palette.setColor(palette.ColorRole.HighlightedText, QColor("#111"))
        self.table.setPalette(palette)
        self.table.currentCellChanged.connect(self._on_current_cell)

        self.chart = pg.GraphicsLayoutWidget()
        self.chart.setBackground("w")
        self.chart.setObjectName("ladder_chart")
        self.plot = pg.PlotItem()
        self.chart.addItem(self.plot, row=0, col=0)
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
        self.chart.addItem(self.legend, row=1, col=0)
        self.unity = pg.InfiniteLine(
            pos=1.0, angle=0, movable=False, pen=pg.mkPen("#888", style=Qt.PenStyle.DashLine)
        )
        self.plot.addItem(self.unity, ignoreBounds=True)
        self._curves: dict[int, pg.PlotDataItem] = {}

        self.heatmap = HeatmapPanel(
            loader,
            empty_text="Click a step (or one of its cells) to see which blocks it computed.",
            compact=True,
        )
        self.heatmap.setObjectName("ladder_heatmap")

        self.bottom_split = QSplitter(Qt.Orientation.Horizontal)
        self.bottom_split.setObjectName("ladder_bottom_split")
        self.bottom_split.addWidget(self.chart)
        self.bottom_split.addWidget(self.heatmap)
        self.bottom_split.setStretchFactor(0, 3)
        self.bottom_split.setStretchFactor(1, 2)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.setObjectName("ladder_split")
        self.split.addWidget(self.table)
        self.split.addWidget(self.bottom_split)
        self.split.setCollapsible(0, False)
        self.split.splitterMoved.connect(self._on_splitter_moved)
        # Small explicit minimums: the tab must not raise the window's minimum height much (the
        # map and chart merely get cramped in a tiny window).
        self.table.setMinimumHeight(48)
        self.bottom_split.setMinimumHeight(72)
        self.split.setStretchFactor(0, 0)
        self.split.setStretchFactor(1, 1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addLayout(second)
        layout.addWidget(self.info)
        layout.addWidget(self.split, 1)
        self._show(None)
        self._update_buttons()

    # ---- store and groups -----------------------------------------------------------------------
    def set_store(self, store: Any) -> None:
        """A new database (or None): list its ladders and show the newest."""
        self._store = store
        self._live_group = None
        self._clear_map()
        # Group ids of the old file mean nothing in the new one: forget the shown ladder.
        self.data = None
        self.picker.blockSignals(True)
        self.picker.clear()
        self.picker.blockSignals(False)
        self.refresh_groups()

    def refresh_groups(self, select: int | None = None) -> None:
        """Re-list the stored ladders; keep the shown one unless ``select`` names another."""
        keep = select if select is not None else self.group_id()
        groups: list[dict[str, Any]] = []
        if self._store is not None:
            try:
                groups = self._store.groups(LADDER_GROUP_KIND)
            except Exception as exc:  # a damaged or vanished file: say so, show nothing
                self.message.emit(f"Cannot list the stored ladders: {exc}")
        self.picker.blockSignals(True)
        self.picker.clear()
        for g in groups:
            self.picker.addItem(self._group_title(g), g["id"])
        index = self.picker.findData(keep) if keep is not None else -1
        self.picker.setCurrentIndex(index if index >= 0 else (0 if groups else -1))
        self.picker.setEnabled(bool(groups))
        self.picker.blockSignals(False)
        self.refresh()

    @staticmethod
    def _group_title(g: dict[str, Any]) -> str:
        steps = len((g.get("spec") or {}).get("steps") or [])
        of = f"/{steps}" if steps else ""
        label = g.get("label") or "ladder"
        created = format_created(g.get("created_at", ""))
        return f"#{g['id']} {label} · {created} · {g['runs']}{of} steps"

    def group_id(self) -> int | None:
        data = self.picker.currentData()
        return int(data) if data is not None else None

    def show_group(self, group_id: int) -> None:
        """Show the stored ladder ``group_id`` (listing it first if it is new)."""
        if self.picker.findData(group_id) < 0:
            self.refresh_groups(select=group_id)
        else:
            self.picker.setCurrentIndex(self.picker.findData(group_id))

    def set_live_group(self, group_id: int | None) -> None:
        """The group a running ladder is filling (its unreached steps are 'pending'), or None."""
        self._live_group = group_id
        if group_id is not None:
            self.show_group(group_id)
        else:
            self.refresh_groups()

    def _on_picked(self, index: int) -> None:
        self._clear_map()
        self.refresh()

    def _clear_map(self) -> None:
        self._shown_row = None
        self.heatmap.set_run(None)

    def refresh(self) -> None:
        """Re-read the shown group from the store (a point arrived, a step ended, runs deleted)."""
        gid = self.group_id()
        data = None
        if self._store is not None and gid is not None:
            try:
                data = read_ladder(self._store, gid, live=gid == self._live_group)
            except Exception as exc:
                self.message.emit(f"Cannot read ladder #{gid}: {exc}")
        self._show(data)

    # ---- drawing --------------------------------------------------------------------------------
    def _show(self, data: LadderData | None) -> None:
        row, col = self.table.currentRow(), self.table.currentColumn()
        same_group = (
            data is not None and self.data is not None and data.group["id"] == self.data.group["id"]
        )
        self.data = data
        if not same_group:
            self._user_sized = False
        self._fill_table()
        self._fill_chart()
        self._fill_info()
        self._update_buttons()
        if data is None or not same_group:
            self._clear_map()
            return
        if 0 <= row < len(data.rows):
            # Keep the user's place in the table.
            self.table.blockSignals(True)
            self.table.setCurrentCell(row, col)
            self.table.blockSignals(False)
        shown = self._shown_row
        if shown is not None and shown < len(data.rows):
            # A live step may have a new point (or a stored one may be gone): redraw its map.
            self.show_step(shown, self.heatmap.current_seq_len())

    def _fill_info(self) -> None:
        data = self.data
        if data is None:
            if self._store is None:
                text = "No run database is open."
            else:
                text = (
                    "No ladder is stored in this database yet. Set the problem, sequence lengths "
                    "and backend in the form, then press Run ladder: the built-in ladder's steps "
                    "(causal mask), each one change on the previous step."
                )
            self.info.setText(text)
            return
        first = next(iter(data.runs.values()), None)
        parts = [f"<b>Ladder #{data.group['id']}</b> {data.group.get('label') or ''}".strip()]
        if first is not None:
            gpu = first.machine.get("gpu_name") or first.machine.get("hostname") or ""
            where = f"{first.backend} on {gpu}" if gpu else first.backend
            parts.append(f"{where} · {first.problem.summary()}")
        counts: dict[str, int] = {}
        for row in data.rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        parts.append(
            f"{len(data.rows)} steps: " + ", ".join(f"{n} {status}" for status, n in counts.items())
        )
        spec = data.group.get("spec") or {}
        preset = ladder_preset_text(spec)
        if preset:
            parts.append(preset)
        total = (spec.get("published") or {}).get("total")
        if total:
            parts.append(f"published on Blackwell: {total}")
        key = self.basis.currentData()
        against = "previous step" if key == "vs_previous" else "baseline"
        parts.append(
            f"cells: TFLOP/s and the speed-up against the {against}, coloured only beyond "
            "the noise (~: within it; as in Compare)"
        )
        self.info.setText(" · ".join(parts))

    def _fill_table(self) -> None:
        data = self.data
        table = self.table
        table.blockSignals(True)
        table.clearContents()
        if data is None:
            table.setRowCount(0)
            table.setColumnCount(0)
            table.blockSignals(False)
            return
        x = "k_len" if data.decode else "N"
        headers = ["Step", "Status", "Compiled"]
        headers += [f"{x} = {format_seq_len(n)}" for n in data.seq_lens]
        table.setColumnCount(len(headers))
        table.setHorizontalHeaderLabels(headers)
        table.setRowCount(len(data.rows))
        for r, step in enumerate(data.rows):
            table.setItem(r, 0, self._step_item(step))
            table.setItem(r, 1, self._status_item(step))
            table.setItem(r, 2, self._compiled_item(step, data.seq_lens))
            for c, n in enumerate(data.seq_lens):
                table.setItem(r, FIRST_LEN_COL + c, self._cell_item(step, n))
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        table.resizeRowsToContents()
        table.blockSignals(False)
        self._fit_table()

    def _fit_table(self) -> None:
        """Every step in view without scrolling (a ladder has a handful), the rest to the chart
        and the map; until the user drags the splitter, for this ladder."""
        total = sum(self.split.sizes())
        if self._user_sized or self.data is None or not self.isVisible() or total <= 0:
            return
        table = self.table
        rows = sum(table.rowHeight(r) for r in range(table.rowCount()))
        wide = table.horizontalHeader().length() > table.viewport().width()
        want = (
            table.horizontalHeader().sizeHint().height()
            + rows
            + 2 * table.frameWidth()
            + (table.horizontalScrollBar().sizeHint().height() if wide else 0)
        )
        top = min(want, MAX_TABLE_HEIGHT, max(total - MIN_CHART_HEIGHT, total // 2))
        if self.split.sizes()[0] != top:
            self.split.setSizes([top, total - top])

    def _on_splitter_moved(self, *_: int) -> None:
        self._user_sized = True

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._fit_table()  # the tab was hidden when the ladder was filled in

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_table()

    def _step_item(self, step: StepRow) -> QTableWidgetItem:
        # One line a step, so a ladder's every step is in view; the knobs are in the tooltip.
        item = QTableWidgetItem(f"{step.number}. {step.name}")
        tip = [step.config] if step.config else []
        tip.append(f"run #{step.run_id}" if step.run_id is not None else "no run for this step")
        run = self.data.runs.get(step.run_id) if self.data and step.run_id else None
        if run is not None:
            tip.append(problem_summary(run))
        if step.published:
            tip.append(f"published on Blackwell: {step.published}")
        item.setToolTip("\n".join(tip))
        return item

    def _status_item(self, step: StepRow) -> QTableWidgetItem:
        item = QTableWidgetItem(step.status)
        color = STATUS_TEXT_COLORS.get(step.status)
        if color is not None:
            item.setForeground(QBrush(color))
        if step.error:
            item.setToolTip(step.error)
        item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
        return item

    def _compiled_item(self, step: StepRow, seq_lens: list[int]) -> QTableWidgetItem:
        """What the step compiled to, once a row (its lengths share a config and head dim), so
        a dip explains itself ("255r spill 5.5KB") and every step stays one line high."""
        found = [
            CompiledResources.from_dict(cell["compiled"])
            for n in seq_lens
            if (cell := step.cells.get(n)) and cell.get("compiled")
        ]
        shorts = list(dict.fromkeys(f.short() for f in found))
        item = QTableWidgetItem(" / ".join(shorts) if shorts else "–")
        item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
        if any(f.spills or f.error for f in found):
            item.setForeground(QBrush(QColor("#b00020")))
        if found:
            item.setToolTip("\n".join(dict.fromkeys(f"compiled: {f.summary()}" for f in found)))
        return item

    def _cell_item(self, step: StepRow, n: int) -> QTableWidgetItem:
        cell = step.cells.get(n)
        if cell is None:
            item = QTableWidgetItem("–")
            item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            item.setBackground(QBrush(MISSING))
            item.setForeground(QBrush(QColor("#616161")))
            why = step.status
            if step.run_id is not None:
                why = f"run #{step.run_id} {step.status}"
                if step.error:
                    why += f": {step.error.splitlines()[0]}"
                elif step.status == "running":
                    why += ": not measured yet"
            item.setToolTip(f"N = {n:,}: no measurement ({why})")
            item.setData(CELL_ROLE, None)
            item.setData(VERDICT_ROLE, "missing")
            return item
        prev, base = cell.get("vs_previous"), cell.get("vs_baseline")
        key = self.basis.currentData()
        ratio = "base" if step.number == 1 else format_marked(cell, key)
        # A decode ladder reads memory: its cells give GB/s of K+V.
        decode = self.data is not None and self.data.decode and cell.get("kv_gbs") is not None
        measure = f"{cell['kv_gbs']:.3g} GB/s" if decode else f"{cell['tflops']:.3g}"
        compiled = cell.get("compiled")
        found = CompiledResources.from_dict(compiled) if compiled else None
        item = QTableWidgetItem(f"{measure}  {ratio}")
        item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
        if found is not None and (found.spills or found.error):
            item.setForeground(QBrush(QColor("#b00020")))
        verdict = speedup_verdict(cell, key)
        if verdict == "gain":
            item.setBackground(QBrush(GAIN))
        elif verdict == "loss":
            item.setBackground(QBrush(LOSS))
        item.setData(CELL_ROLE, dict(cell))
        item.setData(VERDICT_ROLE, verdict)
        item.setToolTip(
            f"N = {n:,}: {cell['latency_ms']:.4g} ms, {cell['tflops']:.4g} TFLOP/s\n"
            f"against the previous step {format_ratio(prev)}{noise_text(cell, 'vs_previous')}, "
            f"against the baseline {format_ratio(base)}{noise_text(cell, 'vs_baseline')}\n"
            + (f"compiled: {found.summary()}\n" if found else "")
            + "click to see this step's block map at this length"
        )
        return item

    def _fill_chart(self) -> None:
        data = self.data
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

    # ---- cells and steps ------------------------------------------------------------------------
    def _len_of_column(self, col: int) -> int | None:
        if self.data is None or col < FIRST_LEN_COL:
            return None
        index = col - FIRST_LEN_COL
        return self.data.seq_lens[index] if index < len(self.data.seq_lens) else None

    def _on_current_cell(self, row: int, col: int, *_: int) -> None:
        if row >= 0:
            self.show_step(row, self._len_of_column(col))

    def show_step(self, row: int, seq_len: int | None = None) -> None:
        """Show step ``row``'s block map at ``seq_len``, else at the length the map shows now
        (the user's choice), else at the step's largest measured length."""
        if self.data is None or not 0 <= row < len(self.data.rows):
            return
        step = self.data.rows[row]
        self._shown_row = row
        chosen = seq_len if seq_len is not None else self.heatmap.current_seq_len()
        run = self.data.runs.get(step.run_id) if step.run_id is not None else None
        if run is None:
            self.heatmap.set_run(None)
            self.heatmap.title.setText(f"Step {step.number} ({step.name}) was not run")
            return
        try:
            points = self._store.points(run.id)
        except Exception as exc:
            self.message.emit(f"Cannot read run #{run.id}: {exc}")
            points = []
        if not points and step.status != "running":
            self.heatmap.set_run(None)
            self.heatmap.title.setText(
                f"Step {step.number} ({step.name}): run #{run.id} {step.status}, nothing measured"
            )
            return
        self.heatmap.set_run(
            run, [p.seq_len for p in points], {p.seq_len: p.extra or {} for p in points}
        )
        # The step's name and run fit beside "Sequence length"; its config is on hover (and
        # in the table's step column), where it ran into the length label.
        self.heatmap.title.setText(f"Step {step.number}: {step.name} · #{run.id}")
        self.heatmap.title.setToolTip(f"{self.heatmap.title.text()} · {run.config.summary()}")
        if chosen is not None:
            self.heatmap.select_seq_len(chosen)

    def select_step(self, row: int, seq_len: int | None = None) -> None:
        """What clicking a step (or its cell at ``seq_len``) does: select it, show its map."""
        assert self.data is not None
        col = 0 if seq_len is None else FIRST_LEN_COL + self.data.seq_lens.index(seq_len)
        if (self.table.currentRow(), self.table.currentColumn()) == (row, col):
            self.show_step(row, seq_len)
        else:
            self.table.setCurrentCell(row, col)

    # ---- buttons --------------------------------------------------------------------------------
    def _on_basis_changed(self) -> None:
        row, col = self.table.currentRow(), self.table.currentColumn()
        self._fill_table()
        self._fill_info()
        if row >= 0:
            self.table.blockSignals(True)
            self.table.setCurrentCell(row, col)
            self.table.blockSignals(False)

    def set_running(self, running: bool) -> None:
        self._running = running
        self._update_buttons()

    def set_can_run(self, can_run: bool, reason: str = "") -> None:
        """Disable Run ladder for a reason that is not a bad value (a read-only database)."""
        self._can_run = can_run
        self.run_button.setToolTip(self._run_tip if can_run else reason)
        self._update_buttons()

    def _update_buttons(self) -> None:
        self.run_button.setEnabled(self._can_run and not self._running and self._store is not None)
        self.cancel_button.setEnabled(self._running)
        self.export_button.setEnabled(self.data is not None and bool(self.data.runs))

    def _on_export_clicked(self) -> None:
        gid = self.group_id()
        if gid is not None:
            self.exportRequested.emit(gid)

    def run_ids(self) -> list[int]:
        """The shown ladder's run ids, in step order."""
        return [] if self.data is None else sorted(self.data.runs)
