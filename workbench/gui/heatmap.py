"""The block map: which (q-block, k-block) pairs one point computed, masked or skipped.

The recipe is pyqtgraph's MatrixDisplayExample: a row-major image (row = q-block, so the picture
reads like the attention matrix), cells centred on integer ticks, y inverted so q-block 0 is at the
top. The three kinds are categories, not a scale, so a legend with counts stands where that example
has a colour bar.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStackedWidget,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from kernels import schedule
from kernels.schedule import BlockKind, cdiv
from workbench.analysis.blockmap_text import source_words
from workbench.analysis.ragged_map import RaggedMap
from workbench.analysis.serving_blocks import with_sequences
from workbench.config import AXIS_LABELS, SEQ_LEN_AXIS
from workbench.gui.split_legend import SplitLegend, split_codes, split_lut, stored_ranges

# Indexed by BlockKind: skipped, computed, masked.
KIND_COLORS = {
    BlockKind.SKIPPED: (230, 230, 230),
    BlockKind.COMPUTED: (31, 119, 180),
    BlockKind.MASKED: (255, 127, 14),
}
KIND_NAMES = {
    BlockKind.SKIPPED: "skipped",
    BlockKind.COMPUTED: "computed",
    BlockKind.MASKED: "masked",
}

# Room each tick label needs along an axis ("120" across, a line of text up the side).
TICK_PX_X = 40
TICK_PX_Y = 24

KIND_LUT = np.array([KIND_COLORS[k] + (255,) for k in sorted(KIND_COLORS)], dtype=np.uint8)
BlockLoader = Callable[[int, int], "np.ndarray | None"]  # (run_id, seq_len) -> grid


@dataclass(frozen=True)
class MapFacts:
    """What the panel says about one block map, kept apart from drawing so tests can read it."""

    counts: dict[str, int]
    skipped_share: float  # of all blocks
    flops_saved: float  # FLOPs the skipped blocks would have cost, whole problem
    flops_dense: float  # FLOPs had every block been computed, whole problem


def map_facts(grid: np.ndarray, rows: int, keys: int, head_dim: int, slices: int) -> MapFacts:
    """Counts per kind, and what skipping saved: 4·rows·keys·D FLOPs per block (a tile of
    ``rows`` query rows by ``keys`` keys) and slice."""
    counts = schedule.kind_counts(grid)
    total = int(grid.size)
    per_block = 4.0 * rows * keys * head_dim * slices
    return MapFacts(
        counts=counts,
        skipped_share=counts["skipped"] / total if total else 0.0,
        flops_saved=counts["skipped"] * per_block,
        flops_dense=total * per_block,
    )


def format_flops(value: float) -> str:
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} FLOP"


def block_tick_step(blocks: int, most_ticks: int = 10) -> int:
    """A whole-block tick step from 1, 2, 5, 10, 20, 50, … giving at most ``most_ticks``."""
    scale = 1
    while True:
        for step in (scale, 2 * scale, 5 * scale):
            if blocks <= step * most_ticks:
                return step
        scale *= 10


class HeatmapPanel(QWidget):
    """Block map of one run at one sequence length, with legend, counts, savings and tooltips."""

    def __init__(
        self,
        loader: BlockLoader,
        parent: QWidget | None = None,
        *,
        empty_text: str = "Select a run in History to see which blocks it computed.",
        compact: bool = False,
    ) -> None:
        """``compact``: for a map beside other views (the Ladder tab's), the summary sentence
        goes into the counts' tooltip and the axes get short titles, leaving the height to the
        map."""
        super().__init__(parent)
        self._loader = loader
        self._empty_text = empty_text
        self._run: Any = None  # workbench.store.RunRecord
        self._grid: np.ndarray | None = None
        self._tiles: tuple[int, int] | None = None
        # Backend facts per length (e.g. the tile sizes an autotuned point used).
        self._point_extras: dict[int, dict[str, Any]] = {}
        self.hover_text = ""

        self.title = QLabel("No run selected")
        self.title.setObjectName("heatmap_title")
        # A long config must not widen the window past a laptop screen: the title is clipped
        # to the room the bar leaves, and its tooltip has the whole line.
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.seq_len = QComboBox()
        self.seq_len.setObjectName("heatmap_seq_len")
        self.seq_len.setMinimumContentsLength(8)
        self.seq_len.currentIndexChanged.connect(self._on_seq_len_changed)
        # Only a length the user picked is kept across refreshes; otherwise a live run's map
        # follows its newest (largest) point.
        self.seq_len.activated.connect(self._on_user_picked)
        self._picked_seq_len: int | None = None
        # The decode form's splits of the key range: each block in the colour of its split.
        self.show_splits = QCheckBox("Splits")
        self.show_splits.setObjectName("heatmap_splits")
        self.show_splits.setChecked(True)
        self.show_splits.setToolTip(
            "Colour each block by the split (CTA) of the key range that read it; a combine "
            "kernel merges the splits' partial outputs"
        )
        self.show_splits.toggled.connect(self._on_seq_len_changed)
        self.show_splits.hide()
        self.length_label = QLabel("Sequence length")
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addSpacing(12)  # a clipped title must not read on into "Sequence length"
        top.addWidget(self.show_splits)
        top.addWidget(self.length_label)
        top.addWidget(self.seq_len)
        self.top_bar = top  # the window adds its actions on the point shown here

        self.canvas = pg.GraphicsLayoutWidget()
        self.canvas.setBackground("w")
        self.plot = self.canvas.addPlot()
        self.plot.setLabel("bottom", "k-block (keys)", color="#222")
        self.plot.setLabel("left", "q-block (queries)", color="#222")
        for name in ("left", "bottom"):
            # Block numbers, never "(x0.001)": a one-row map's axis spans -0.5 to 0.5.
            self.plot.getAxis(name).enableAutoSIPrefix(False)
            self.plot.getAxis(name).setTextPen(pg.mkPen("#222"))
            self.plot.getAxis(name).setPen(pg.mkPen("#444"))
        self.plot.invertY(True)
        self.plot.setAspectLocked(False)
        self.plot.setMenuEnabled(False)
        # Row-major on the item itself, so the map is right whatever the global option says.
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setLookupTable(KIND_LUT)
        self.plot.addItem(self.image)
        self.canvas.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.plot.getViewBox().sigResized.connect(self._on_view_resized)
        # Without a map there are no blocks to put on axes: a sentence instead of an empty
        # plot whose default range reads "(x0.001)" from -400 to 400.
        self.empty_label = QLabel()
        self.empty_label.setObjectName("heatmap_empty")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        self.empty_label.setStyleSheet("color: #555; background: white; font-size: 13px;")
        self.view_stack = QStackedWidget()
        self.view_stack.addWidget(self.empty_label)
        self.view_stack.addWidget(self.canvas)

        legend = QHBoxLayout()
        self.count_labels: dict[str, QLabel] = {}
        self.kind_swatches: list[QLabel] = []  # hidden while the map is coloured by split
        for kind in (BlockKind.COMPUTED, BlockKind.MASKED, BlockKind.SKIPPED):
            swatch = QLabel()
            swatch.setFixedSize(14, 14)
            r, g, b = KIND_COLORS[kind]
            swatch.setStyleSheet(f"background: rgb({r},{g},{b}); border: 1px solid #666;")
            label = QLabel(f"{KIND_NAMES[kind]}: –")
            label.setObjectName(f"count_{KIND_NAMES[kind]}")
            self.count_labels[KIND_NAMES[kind]] = label
            self.kind_swatches.append(swatch)
            legend.addWidget(swatch)
            legend.addWidget(label)
            legend.addSpacing(12)
        legend.addStretch(1)
        self.summary = QLabel()
        self.summary.setObjectName("heatmap_summary")
        self.summary.setWordWrap(True)
        self._y_title = "q-block" if compact else "q-block (queries)"
        if compact:
            self.plot.setLabel("left", "q-block", color="#222")
            self.plot.setLabel("bottom", "k-block", color="#222")
            self.summary.hide()
        self.split_legend = SplitLegend()
        self.split_legend.setObjectName("heatmap_split_legend")
        self._ranges: list[tuple[int, int]] = []  # the shown point's splits, when it had some
        self._ragged: RaggedMap | None = None  # the shown point's sequences, for a ragged batch

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.view_stack, 1)
        self.legend_row = QWidget()
        self.legend_row.setLayout(legend)
        legend.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.legend_row)
        layout.addWidget(self.split_legend)
        layout.addWidget(self.summary)
        self.facts: MapFacts | None = None
        self._show_message(self._empty_text)

    # ---- input ----------------------------------------------------------------------------------
    def set_run(
        self,
        run: Any,
        seq_lens: list[int] | None = None,
        extras: dict[int, dict[str, Any]] | None = None,
    ) -> None:
        """Show ``run`` (a RunRecord, or None); ``seq_lens`` are its measured lengths and
        ``extras`` their backend facts (``PointRecord.extra``)."""
        self._point_extras = dict(extras or {})
        same_run = self._run is not None and run is not None and self._run.id == run.id
        if not same_run:
            self._picked_seq_len = None
        self._run = run
        decode = run is not None and getattr(run, "axis", SEQ_LEN_AXIS) != SEQ_LEN_AXIS
        self.length_label.setText("Key length" if decode else "Sequence length")
        self.seq_len.blockSignals(True)
        self.seq_len.clear()
        for n in seq_lens or []:
            self.seq_len.addItem(f"{n:,}", n)
        # Keep the length the user chose, else the largest (the most telling map).
        index = self.seq_len.findData(self._picked_seq_len) if self._picked_seq_len else -1
        self.seq_len.setCurrentIndex(index if index >= 0 else self.seq_len.count() - 1)
        self.seq_len.blockSignals(False)
        if run is None:
            self.title.setText("No run selected")
            self._show_message(self._empty_text)
            return
        config = run.config.summary_for(run.backend, run.own_knobs)
        self.title.setText(f"#{run.id} {run.label or '(no label)'} · {run.backend} · {config}")
        self.title.setToolTip(self.title.text())
        self._on_seq_len_changed()

    def select_seq_len(self, seq_len: int) -> None:
        """Show the map at ``seq_len`` and keep it there, as if the user had picked it."""
        index = self.seq_len.findData(seq_len)
        if index >= 0:
            self._picked_seq_len = seq_len
            self.seq_len.setCurrentIndex(index)

    def _on_user_picked(self, index: int) -> None:
        self._picked_seq_len = self.seq_len.itemData(index)

    def _on_seq_len_changed(self) -> None:
        n = self.seq_len.currentData()
        if self._run is None:
            return
        if n is None:
            self._show_message("This run has no measured points yet.")
            return
        grid = self._loader(self._run.id, n)
        if grid is None:
            self._show_message(f"No block map was stored for {self._x()} = {n:,}.")
            return
        self._show_grid(np.asarray(grid), n)

    def _x(self) -> str:
        """What the run's lengths are called: N, or k_len in a decode sweep."""
        return AXIS_LABELS.get(getattr(self._run, "axis", SEQ_LEN_AXIS), "N")

    def _lengths(self, seq_len: int) -> tuple[int, int]:
        """The point's (rows of a slice, k_len): a decode sweep's q_len is fixed and its
        packed heads are rows of one tile."""
        run = self._run
        if getattr(run, "axis", SEQ_LEN_AXIS) == SEQ_LEN_AXIS:
            q_len, k_len = seq_len, seq_len + run.problem.input_pos
        else:
            q_len, k_len = run.problem.q_len, seq_len
        extra = next(iter(self._extras(seq_len)), {})
        if schedule.recorded_packed(extra):
            q_len *= run.problem.group_size
        return q_len, k_len

    # ---- drawing --------------------------------------------------------------------------------
    def _show_message(self, text: str) -> None:
        self._grid = None
        self._ragged = None
        self.facts = None
        self.image.clear()
        self.empty_label.setText(text)
        self.view_stack.setCurrentWidget(self.empty_label)
        for name, label in self.count_labels.items():
            label.setText(f"{name}: –")
        self.summary.setText("")  # the message is in the view already: once is enough
        self.legend_row.setToolTip("")

    def _tiles_for(self, grid: np.ndarray, seq_len: int) -> tuple[int, int] | None:
        """Tile sizes that produced ``grid``: those the point records it launched (an
        autotuned cuTile point keeps them under ``launch``), else the config's, if they fit."""
        run = self._run
        q_len, k_len = self._lengths(seq_len)
        rows, cols = grid.shape
        candidates = schedule.recorded_tile_shapes(self._extras(seq_len), run.config.knob_values())
        for tm, tn in candidates:
            if (
                isinstance(tm, int)
                and isinstance(tn, int)
                and (cdiv(q_len, tm), cdiv(k_len, tn)) == (rows, cols)
            ):
                return tm, tn
        return None

    def _tile_sizes(self) -> tuple[int, int]:
        """The shown map's tiles: those its point launched, else the run's config's."""
        return self._tiles or schedule.tile_shape(self._run.config.knob_values())

    def _extras(self, seq_len: int) -> list[dict[str, Any]]:
        found = self._point_extras.get(seq_len)
        return [found] if isinstance(found, dict) else []

    def _show_grid(self, grid: np.ndarray, seq_len: int) -> None:
        self._grid = grid
        rows, cols = grid.shape
        extra = next(iter(self._extras(seq_len)), None)
        self._ranges = stored_ranges(extra)
        run = self._run
        if run is not None and run.problem.lengths is not None:
            extra = with_sequences(extra, run.problem.at(run.axis, seq_len), run.config)
        self._ragged = ragged = RaggedMap.of(extra, rows)
        ragged_splits = ragged.most_splits() if ragged is not None else 0
        self.show_splits.setVisible(bool(self._ranges) or ragged_splits > 1)
        if ragged is not None and ragged_splits > 1 and self.show_splits.isChecked():
            self.image.setLookupTable(split_lut(ragged_splits))
            codes = ragged.split_codes(grid)
            self.image.setImage(codes, levels=(0, ragged_splits + 1), autoLevels=False)
            self.split_legend.set_split_count(ragged_splits)
        elif self._ranges and self.show_splits.isChecked():
            # Code s + 1 for split s, 0 for skipped, each its row of the splits' table.
            codes = split_codes(grid, self._ranges)
            self.image.setLookupTable(split_lut(len(self._ranges)))
            levels = (0, len(self._ranges) + 1)
            self.image.setImage(codes, levels=levels, autoLevels=False)
            self.split_legend.set_splits(self._ranges)
        else:
            # levels (0, 3) with a 3-entry table maps codes 0, 1, 2 straight to table rows.
            self.image.setLookupTable(KIND_LUT)
            self.image.setImage(grid.astype(np.uint8), levels=(0, 3), autoLevels=False)
            self.split_legend.set_splits([])
        by_split = self.split_legend.isVisibleTo(self) and self.show_splits.isChecked()
        for swatch in self.kind_swatches:  # the split colours reuse blue and orange
            swatch.setVisible(not by_split)
        self.image.setRect(QRectF(-0.5, -0.5, cols, rows))
        self.plot.setRange(xRange=(-0.5, cols - 0.5), yRange=(-0.5, rows - 0.5), padding=0.02)
        self.view_stack.setCurrentWidget(self.canvas)
        self._space_ticks()
        self._tiles = self._tiles_for(grid, seq_len)
        run = self._run
        tm, tn = self._tile_sizes()
        self.facts = map_facts(
            grid, tm, tn, run.problem.head_dim, run.problem.batch * run.problem.heads
        )
        y_title = "sequence (its q-blocks)" if ragged else self._y_title
        self.plot.setLabel("left", y_title, color="#222")
        origin = source_words(next(iter(self._extras(seq_len)), None))
        origin = f" Block map: {origin}." if origin else ""
        if ragged is not None:  # the sequences' own blocks, and what the batch read
            for name, count in ragged.own_counts(grid).items():
                self.count_labels[name].setText(f"{name}: {count:,}")
            page_size = getattr(run.problem, "page_size", None)
            self.summary.setText(ragged.summary(self._x(), seq_len, tn, page_size) + origin)
            self.legend_row.setToolTip(self.summary.text())
            return
        for name, label in self.count_labels.items():
            label.setText(f"{name}: {self.facts.counts[name]:,}")
        skipped = self.facts.counts["skipped"]
        splits = f" Read by {len(self._ranges)} splits of the key range." if self._ranges else ""
        self.summary.setText(
            f"{self._x()} = {seq_len:,}: {rows} × {cols} blocks of {tm} × {tn}.{origin}{splits} "
            f"Skipped {skipped:,} of {grid.size:,} blocks "
            f"({100 * self.facts.skipped_share:.1f} %), "
            f"saving {format_flops(self.facts.flops_saved)} of "
            f"{format_flops(self.facts.flops_dense)} dense "
            f"(B·H = {run.problem.batch * run.problem.heads} slices)."
        )
        self.legend_row.setToolTip(self.summary.text())
        self.title.setToolTip(self.title.text() + (f"\n{origin.strip()}" if origin else ""))

    def _space_ticks(self) -> None:
        """Whole blocks only (pyqtgraph's own spacing puts ticks at half blocks on small maps),
        and no more labels than the axis has room for: a short map's ticks overlapped."""
        if self._grid is None:
            return
        rows, cols = self._grid.shape
        box = self.plot.getViewBox().sceneBoundingRect()
        for name, count, pixels, per_label in (
            ("bottom", cols, box.width(), TICK_PX_X),
            ("left", rows, box.height(), TICK_PX_Y),
        ):
            most = max(2, min(10, int(pixels // per_label))) if pixels > 0 else 10
            axis = self.plot.getAxis(name)
            if name == "left" and self._ragged is not None:
                axis.setTicks([self._ragged.tick_labels(most)])  # "#i" at each sequence
                continue
            axis.setTicks(None)
            step = block_tick_step(count, most)
            axis.setTickSpacing(step, step)

    def _on_view_resized(self) -> None:
        self._space_ticks()

    # ---- tooltip --------------------------------------------------------------------------------
    def block_text(self, row: int, col: int) -> str:
        """Tooltip text for block (row, col): coordinates, token ranges and kind."""
        assert self._grid is not None and self._run is not None
        kind = KIND_NAMES[BlockKind(int(self._grid[row, col]))]
        if self._ragged is not None:
            return self._ragged_block_text(row, col, kind)
        text = f"q-block {row}, k-block {col}: {kind}"
        owner = [s for s, (lo, hi) in enumerate(self._ranges) if lo <= col < hi]
        if owner and kind != "skipped":
            text += f", read by split {owner[0]} of {len(self._ranges)} splits"
        if self._tiles is not None:
            tm, tn = self._tiles
            q_len, k_len = self._lengths(self.seq_len.currentData())
            q_lo, q_hi = row * tm, min((row + 1) * tm, q_len) - 1
            k_lo, k_hi = col * tn, min((col + 1) * tn, k_len) - 1
            text += f"\nqueries {q_lo}–{q_hi}, keys {k_lo}–{k_hi}"
        return text

    def _ragged_block_text(self, row: int, col: int, kind: str) -> str:
        assert self._ragged is not None
        ragged = self._ragged
        keys = int(ragged.sequences[ragged.sequence_at(row)].get("keys", 0))
        tn = self._tile_sizes()[1]
        if col * tn >= keys:
            return f"{ragged.sequence_text(row)}\nk-block {col}: past its keys (padding)"
        text = f"{ragged.sequence_text(row)}\nk-block {col} (keys {col * tn}–"
        text += f"{min((col + 1) * tn, keys) - 1}): {kind}"
        owner = ragged.split_of(row, col)
        if owner is not None and owner[1] > 1 and kind != "skipped":
            text += f", read by split {owner[0]} of its {owner[1]} splits"
        return text

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        if self._grid is None:
            return
        box = self.plot.getViewBox()
        if not box.sceneBoundingRect().contains(scene_pos):
            return
        point = box.mapSceneToView(scene_pos)
        col, row = round(point.x()), round(point.y())
        rows, cols = self._grid.shape
        if 0 <= row < rows and 0 <= col < cols:
            self.hover_text = self.block_text(row, col)
            self.canvas.setToolTip(self.hover_text)
            QToolTip.showText(QCursor.pos(), self.hover_text, self.canvas)
        else:
            self.hover_text = ""
            self.canvas.setToolTip("")
            QToolTip.hideText()

    def current_grid(self) -> np.ndarray | None:
        return self._grid

    @property
    def run(self) -> Any:
        """The run shown (a RunRecord), or None."""
        return self._run

    def current_seq_len(self) -> int | None:
        return self.seq_len.currentData()
