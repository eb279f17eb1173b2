"""What a view shows, read from its widgets' public Qt and pyqtgraph state for the GUI tests.

The views keep no methods for the tests: these read a table cell's text and background, the
points of the curve drawn in a run's colour (or named in a legend), a legend's names, a list
row's enabled flag and tooltip and a pixel of the block map from the items themselves, so a
view that draws the wrong thing fails the test that reads it.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QListWidget, QListWidgetItem, QTableWidget, QTableWidgetItem

from workbench.gui.colors import run_color, run_style
from workbench.gui.plot_axes import format_seq_len


# ---- tables ----------------------------------------------------------------------------------
def table_item(table: QTableWidget, row: int, col: int) -> QTableWidgetItem:
    item = table.item(row, col)
    assert item is not None, f"{table.objectName()} has no item at ({row}, {col})"
    return item


def cell_text(table: QTableWidget, row: int, col: int) -> str:
    return table_item(table, row, col).text()


def cell_colored(table: QTableWidget, row: int, col: int) -> bool:
    """Whether the cell is painted: a brush other than none behind its text."""
    return table_item(table, row, col).background().style() != Qt.BrushStyle.NoBrush


def column_of_length(table: QTableWidget, seq_len: int) -> int:
    """The column headed "N = 1k" (or "k_len = 1k") for ``seq_len``."""
    wanted = f" = {format_seq_len(seq_len)}"
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    columns = [c for c, text in enumerate(headers) if text.endswith(wanted)]
    assert len(columns) == 1, f"no single column for {seq_len} among {headers}"
    return columns[0]


def length_cell(table: QTableWidget, row: int, seq_len: int) -> QTableWidgetItem:
    """The item of row ``row`` under ``seq_len``'s column (a ladder step at one length)."""
    return table_item(table, row, column_of_length(table, seq_len))


# ---- plots -----------------------------------------------------------------------------------
def legend_names(legend: pg.LegendItem) -> list[str]:
    return [label.text for _, label in legend.items]


def plotted(item: pg.PlotDataItem | pg.PlotCurveItem) -> tuple[np.ndarray, np.ndarray]:
    """The (x, y) an item was given, before a log axis transforms it."""
    if isinstance(item, pg.PlotDataItem):
        x, y = item.getOriginalDataset()
    else:
        x, y = item.getData()
    return (
        np.asarray(x if x is not None else [], dtype=float),
        np.asarray(y if y is not None else [], dtype=float),
    )


def legend_curve(legend: pg.LegendItem, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The points of the curve the legend entry ``name`` stands for."""
    items = [sample.item for sample, label in legend.items if label.text == name]
    assert len(items) == 1, f"no single legend entry {name!r} among {legend_names(legend)}"
    return plotted(items[0])


def run_line(plot: pg.PlotItem, run_id: int) -> pg.PlotDataItem:
    """The line the plot draws in run ``run_id``'s colour and marker (every view styles a run
    by id; ids ten apart share a colour, not a marker)."""
    style = run_style(run_id)
    lines = [
        item
        for item in plot.items
        if isinstance(item, pg.PlotDataItem)
        and item.opts["pen"].color() == style.color
        and item.opts["symbol"] == style.symbol
    ]
    assert len(lines) == 1, f"{len(lines)} lines in run #{run_id}'s colour"
    return lines[0]


def run_curve(plot: pg.PlotItem, run_id: int) -> tuple[np.ndarray, np.ndarray]:
    """The (x, y) of run ``run_id``'s line in ``plot``."""
    return plotted(run_line(plot, run_id))


def run_band(plot: pg.PlotItem, run_id: int) -> pg.FillBetweenItem:
    """The translucent band the plot fills in run ``run_id``'s colour."""
    rgb = run_color(run_id).rgb()  # the band's alpha differs from the line's: compare RGB
    bands = [
        item
        for item in plot.items
        if isinstance(item, pg.FillBetweenItem) and item.brush().color().rgb() == rgb
    ]
    assert len(bands) == 1, f"{len(bands)} bands in run #{run_id}'s colour"
    return bands[0]


def run_band_edges(plot: pg.PlotItem, run_id: int) -> tuple[np.ndarray, np.ndarray]:
    """The y values of the low and the high edge of run ``run_id``'s band."""
    low, high = run_band(plot, run_id).curves
    return plotted(low)[1], plotted(high)[1]


def drawn_rgb(image: pg.ImageItem, row: int, col: int) -> tuple[int, int, int]:
    """The colour an image item rendered at (row, col), lookup table applied."""
    qimage = image.qimage
    assert qimage is not None, "the image has not been rendered"
    color = qimage.pixelColor(col, row)
    return color.red(), color.green(), color.blue()


# ---- lists -----------------------------------------------------------------------------------
def list_row(widget: QListWidget, text: str) -> QListWidgetItem:
    rows = [widget.item(i) for i in range(widget.count()) if widget.item(i).text() == text]
    assert len(rows) == 1, f"no single row {text!r} in {widget.objectName() or 'the list'}"
    return rows[0]


def row_enabled(widget: QListWidget, text: str) -> bool:
    """Whether the row ``text`` can be used (ticked), as its item flags say."""
    return bool(list_row(widget, text).flags() & Qt.ItemFlag.ItemIsEnabled)


def row_tooltip(widget: QListWidget, text: str) -> str:
    return list_row(widget, text).toolTip()
