"""The block map's split view: which split (CTA) of the key range read each block, as colours.

In the decode form each tile's key blocks are read by several splits whose partial outputs a
combine kernel merges (:func:`kernels.schedule.split_ranges`). A stored point keeps the split
ranges it ran (``split_ranges`` in its extra); with its block map they give the split of every
visited block (:func:`kernels.schedule.split_map_of`). Here: the colour table (skipped grey,
then one colour per split, cycling), the image codes, and a legend of the splits' key blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PySide6.QtWidgets import QGridLayout, QLabel, QWidget

from kernels.schedule import split_map_of
from workbench.gui.colors import run_color

SKIPPED_RGB = (230, 230, 230)
# A legend of more splits than this would take the map's room: the rest are summed up.
LEGEND_SPLITS = 16
# Swatches per legend row: short "s: lo–hi" entries in rows of this many keep the legend
# narrower than the map on a laptop screen whatever the split count (the full words are in
# each entry's tooltip).
LEGEND_COLUMNS = 4


def split_rgb(split: int) -> tuple[int, int, int]:
    """The colour of split ``split``: the runs' palette, so neighbours differ clearly."""
    color = run_color(split)
    return color.red(), color.green(), color.blue()


def split_lut(n_splits: int) -> np.ndarray:
    """Image colour table: code 0 skipped, code s + 1 split s."""
    rows = [SKIPPED_RGB, *(split_rgb(s) for s in range(n_splits))]
    return np.array([(*rgb, 255) for rgb in rows], dtype=np.uint8)


def split_codes(grid: np.ndarray, ranges: Sequence[Sequence[int]]) -> np.ndarray:
    """Image codes of a stored block map under its splits: 0 skipped, s + 1 for split s."""
    pairs = [(int(lo), int(hi)) for lo, hi in ranges]
    return (split_map_of(np.asarray(grid), pairs).astype(np.int32) + 1).astype(np.uint16)


def stored_ranges(extra: dict | None) -> list[tuple[int, int]]:
    """A point's split ranges, when it ran more than one split of the key range."""
    ranges = (extra or {}).get("split_ranges")
    if not isinstance(ranges, list) or len(ranges) < 2:
        return []
    return [(int(lo), int(hi)) for lo, hi in ranges]


class SplitLegend(QWidget):
    """A swatch per split with its key blocks, in rows; hidden for a point without splits."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(0, 0, 0, 0)
        self._grid.setHorizontalSpacing(4)
        self._grid.setVerticalSpacing(2)
        self.texts: list[str] = []
        self.hide()

    def set_splits(self, ranges: Sequence[tuple[int, int]]) -> None:
        """One point's splits: each swatch with the key blocks it read."""
        texts = [f"split {s}: key blocks {lo}–{hi - 1}" for s, (lo, hi) in enumerate(ranges)]
        shorts = [f"{s}: {lo}–{hi - 1}" for s, (lo, hi) in enumerate(ranges)]
        self._fill("splits (key blocks):", texts, shorts)

    def set_split_count(self, count: int) -> None:
        """A ragged batch, whose sequences each split their own key range: swatches by number."""
        texts = [f"split {s} of a sequence's key range" for s in range(count)]
        self._fill("splits (of each sequence's keys):", texts, [str(s) for s in range(count)])

    def _fill(self, title: str, texts: list[str], shorts: list[str]) -> None:
        while self._grid.count():
            item = self._grid.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.texts = texts
        self._grid.addWidget(QLabel(title), 0, 0)
        for s, (short, text) in enumerate(zip(shorts, texts[:LEGEND_SPLITS])):
            row, col = divmod(s, LEGEND_COLUMNS)
            swatch = QLabel(short)
            r, g, b = split_rgb(s)
            swatch.setStyleSheet(
                f"border-left: 12px solid rgb({r},{g},{b}); padding-left: 3px; margin-right: 6px;"
            )
            swatch.setToolTip(text)
            self._grid.addWidget(swatch, row, 1 + col)
        if len(self.texts) > LEGEND_SPLITS:
            rows = -(-LEGEND_SPLITS // LEGEND_COLUMNS)
            more = QLabel(f"… and {len(self.texts) - LEGEND_SPLITS} more")
            self._grid.addWidget(more, rows, 1, 1, LEGEND_COLUMNS)
        self._grid.setColumnStretch(1 + LEGEND_COLUMNS, 1)
        self.setToolTip("\n".join(self.texts))
        self.setVisible(bool(self.texts))
