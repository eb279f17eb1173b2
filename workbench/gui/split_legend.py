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
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from kernels.schedule import split_map_of
from workbench.gui.colors import run_color

SKIPPED_RGB = (230, 230, 230)
# A legend of more splits than this would push the map off a laptop screen: the rest are summed.
LEGEND_SPLITS = 12


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
    """A swatch per split with its key blocks; hidden for a point without splits."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 0)
        self.texts: list[str] = []
        self.hide()

    def set_splits(self, ranges: Sequence[tuple[int, int]]) -> None:
        while self._row.count():
            item = self._row.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.texts = [f"split {s}: key blocks {lo}–{hi - 1}" for s, (lo, hi) in enumerate(ranges)]
        for s, text in enumerate(self.texts[:LEGEND_SPLITS]):
            swatch = QLabel()
            swatch.setFixedSize(14, 14)
            r, g, b = split_rgb(s)
            swatch.setStyleSheet(f"background: rgb({r},{g},{b}); border: 1px solid #666;")
            self._row.addWidget(swatch)
            self._row.addWidget(QLabel(text))
            self._row.addSpacing(8)
        if len(self.texts) > LEGEND_SPLITS:
            self._row.addWidget(QLabel(f"… and {len(self.texts) - LEGEND_SPLITS} more"))
        self._row.addStretch(1)
        self.setVisible(bool(self.texts))
