"""One stable colour per run id, used by every view (plots, history swatches, compare table).

The colour depends on the id alone, so a run keeps its colour across sessions, selections and
views; a palette indexed by "position in the current selection" would recolour runs whenever the
selection changes, which makes overlays hard to read.
"""

from __future__ import annotations

from PySide6.QtGui import QColor

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


def run_color(run_id: int) -> QColor:
    """The colour of run ``run_id``: the palette cycles, and each cycle is a little darker.

    Ids 10 apart would otherwise share a colour; shifting lightness per cycle keeps them apart
    while every variant stays a saturated, readable line colour.
    """
    base = QColor(_PALETTE[run_id % len(_PALETTE)])
    cycle = (run_id // len(_PALETTE)) % 3
    # darker(100) is identity; 125 and 150 are still far from black for every palette entry.
    return base.darker(100 + 25 * cycle)


def with_alpha(color: QColor, alpha: int) -> QColor:
    """A copy of ``color`` with ``alpha`` (0-255), for bands and cell backgrounds."""
    out = QColor(color)
    out.setAlpha(alpha)
    return out
