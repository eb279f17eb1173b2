"""The ladder view: steps × sequence lengths, their speed-ups, a chart, each step's block map.

A ladder is a group of runs of kind 'ladder' (:mod:`workbench.jobs.ladder_steps`): one run per
step, each one change on the previous step, all on the same inputs. What is shown is the core's
:func:`~workbench.jobs.ladder_steps.read_ladder`; this module only lays it out. Steps that the
group names but that have no run (the ladder was cancelled, or a crash ended it) are listed as "not
run" ("pending" while the ladder runs), and a length a step did not measure shows "–" with the run's
status, so a failed step can never pass for a slow one.

A cell's background is the core's :func:`~workbench.jobs.ladder_steps.speedup_verdict` against the
previous step or the baseline (the user picks which). Clicking a step shows its block map beside the
chart, at the length of the clicked column (or the length the map already shows).
"""

from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.analysis.compare import noise_rule
from workbench.config import MAX_LABEL_CHARS
from workbench.gui.heatmap import BlockLoader, HeatmapPanel
from workbench.gui.ladder_cells import (
    CELL_ROLE,
    GAIN,
    LOSS,
    MISSING,
    VERDICT_ROLE,
    cell_item,
    compiled_item,
    status_item,
    step_item,
)
from workbench.gui.ladder_chart import LadderChart
from workbench.gui.ladder_text import group_title, info_text
from workbench.gui.plot_axes import format_seq_len
from workbench.jobs.ladder_steps import GROUP_KIND as LADDER_GROUP_KIND
from workbench.jobs.ladder_steps import LADDER_PRESETS, LadderData, read_ladder

# The preset box's last item, and what its file dialog lists.
FROM_FILE = "file"
STEPS_FILTER = "Ladder steps (*.json);;All files (*)"

# The cell roles and colours tests read from here since before the cells had their module.
__all__ = ["CELL_ROLE", "GAIN", "LOSS", "MISSING", "VERDICT_ROLE", "LadderPanel"]

# The combo says what a cell is coloured against on its own: a "Colour vs" label before it and
# a preset box wide enough for "model-inputs" widened the window's minimum past 790 px.
BASES = (("vs previous step", "vs_previous"), ("vs baseline", "vs_baseline"))
EMPTY_CHART_STEPS = 7  # the built-in ladders' steps: the empty chart's axis
LEGEND_COLUMNS = 3  # more, and the legend widened the chart past its pane
MAX_TABLE_HEIGHT = 420  # px: beyond about ten steps the table scrolls
MIN_CHART_HEIGHT = 240  # px left at least to the chart and the map when the table is fitted
FIRST_LEN_COL = 3  # Step, Status, Compiled, then one column per sequence length


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
        self.preset.addItem("a steps file…", FROM_FILE)  # the user's own, a plugin's knobs too
        self.preset.activated.connect(self._on_preset_activated)
        self.preset.setToolTip(
            "The ladder Run ladder runs: this GPU's tile ladder, Hopper's, Blackwell's, the "
            "decode ladder (baseline, GQA packing, KV split, autotuned) on a k_len form, or "
            "a steps file of your own (a JSON 'steps' list; a step may change a loaded "
            "plugin's knobs)"
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

        self.chart = LadderChart()
        self.plot = self.chart.plot  # the views' tests read the chart's plot and legend here
        self.legend = self.chart.legend

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
            self.picker.addItem(group_title(g), g["id"])
        index = self.picker.findData(keep) if keep is not None else -1
        self.picker.setCurrentIndex(index if index >= 0 else (0 if groups else -1))
        self.picker.setEnabled(bool(groups))
        self.picker.blockSignals(False)
        self.refresh()

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
        self.chart.show_ladder(data)
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
        self.info.setText(info_text(self.data, self._store is not None, self.basis.currentData()))

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
        key = self.basis.currentData()
        headers += [f"{x} = {format_seq_len(n)}" for n in data.seq_lens]
        table.setColumnCount(len(headers))
        table.setHorizontalHeaderLabels(headers)
        table.setRowCount(len(data.rows))
        for r, step in enumerate(data.rows):
            run = data.runs.get(step.run_id) if step.run_id is not None else None
            table.setItem(r, 0, step_item(step, run))
            table.setItem(r, 1, status_item(step))
            table.setItem(r, 2, compiled_item(step, data.seq_lens, run))
            for c, n in enumerate(data.seq_lens):
                table.setItem(r, FIRST_LEN_COL + c, cell_item(step, n, key, data.decode))
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

    def _on_preset_activated(self, index: int) -> None:
        """ "a steps file…": pick one; it joins the box by its file name, and Cancel goes back
        to this GPU's ladder."""
        if self.preset.itemData(index) != FROM_FILE:
            return
        path, _ = QFileDialog.getOpenFileName(self, "A ladder's steps", "", STEPS_FILTER)
        if not path:
            self.preset.setCurrentIndex(0)
            return
        at = self.preset.findData(path)
        if at < 0:
            at = self.preset.count() - 1  # before "a steps file…"
            self.preset.insertItem(at, os.path.basename(path), path)
            self.preset.setItemData(at, path, Qt.ItemDataRole.ToolTipRole)
        self.preset.setCurrentIndex(at)

    def _on_export_clicked(self) -> None:
        gid = self.group_id()
        if gid is not None:
            self.exportRequested.emit(gid)

    def run_ids(self) -> list[int]:
        """The shown ladder's run ids, in step order."""
        return [] if self.data is None else sorted(self.data.runs)
