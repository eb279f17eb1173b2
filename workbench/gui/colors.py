"""One stable style per run id (colour, marker, dash), used by every view (plots, history
swatches, compare table).

The colour depends on the id alone, so a run keeps its colour across sessions, selections and
views; a palette indexed by "position in the current selection" would recolour runs whenever the
selection changes, which makes overlays hard to read.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPen

# Ten qualitative colours (Tableau 10, minus its grey, plus a dark teal) that stay readable as
# thin lines on a white background. Consecutive ids (the common "compare my last runs" case) get
# clearly different colours.
_PALETTE = (
    "#1f77b4",  # blue
    "#ff7f0e",  # orange
    "#2ca02c",  # green
    "#d62728",  # red
    "#9467bd",  # purple
    "#8c564b",  # brown
    "#e377c2",  # pink
    "#17becf",  # cyan
    "#bcbd22",  # olive
    "#00695c",  # dark teal
)


# Past the palette's ten, a run keeps a palette colour and gets its own marker and dash: a
# darker shade of purple read as brown, and two of a colour told apart by nothing.
_SYMBOLS = ("o", "s", "t", "d", "star")
_DASHES = (
    Qt.PenStyle.SolidLine,
    Qt.PenStyle.DashLine,
    Qt.PenStyle.DotLine,
    Qt.PenStyle.DashDotLine,
    Qt.PenStyle.DashDotDotLine,
)


@dataclass(frozen=True)
class RunStyle:
    """How every view draws one run: a palette colour, a marker (pyqtgraph's symbol) and the
    line's dash."""

    color: QColor
    symbol: str
    dash: Qt.PenStyle

    def pen(self, width: float = 2) -> QPen:
        pen = QPen(self.color)
        pen.setWidthF(width)
        pen.setStyle(self.dash)
        pen.setCosmetic(True)  # the width in pixels, whatever the plot's scale
        return pen


def run_style(run_id: int) -> RunStyle:
    """The style of run ``run_id``: the palette's colours in turn, then each turn of the
    palette the next marker and dash, so 50 consecutive ids never share a style."""
    size = len(_PALETTE)
    turn = (run_id // size) % len(_SYMBOLS)
    return RunStyle(QColor(_PALETTE[run_id % size]), _SYMBOLS[turn], _DASHES[turn])


def run_color(run_id: int) -> QColor:
    """The colour of run ``run_id`` (:func:`run_style`)."""
    return run_style(run_id).color


def with_alpha(color: QColor, alpha: int) -> QColor:
    """A copy of ``color`` with ``alpha`` (0-255), for bands and cell backgrounds."""
    out = QColor(color)
    out.setAlpha(alpha)
    return out
