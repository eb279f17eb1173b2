"""The run history's table model: runs over the store, a page at a time, and how a run's cells read.

The model pages through ``store.runs(limit, offset)`` as the view scrolls (``canFetchMore`` /
``fetchMore``), so a database of thousands of runs opens with one small query and scrolling only
ever parses the next page. Label cells are editable (relabel); a store error is reported through
``storeFailed``, never raised into Qt.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QColor

from workbench.analysis.compare import compiled_of
from workbench.analysis.resources import CompiledResources, compiled_from_registry
from workbench.analysis.tuned import tuned_labels, tuned_lines
from workbench.gui.colors import run_color

COLUMNS = ("ID", "Label", "Created", "Backend", "GPU", "Config", "Seq lengths", "Status")
COL_ID, COL_LABEL, COL_CREATED, COL_BACKEND, COL_GPU, COL_CONFIG, COL_SEQ, COL_STATUS = range(8)
STATUS_COLORS = {
    "running": QColor("#1565c0"),
    "complete": QColor("#2e7d32"),
    "failed": QColor("#c62828"),
    "cancelled": QColor("#8d6e00"),
}
AnyIndex = QModelIndex | QPersistentModelIndex


def format_created(iso: str) -> str:
    """Stored UTC ISO time → local "YYYY-MM-DD HH:MM" (as stored if it does not parse)."""
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError):
        return iso or ""


def format_seq_lens(seq_lens: tuple[int, ...]) -> str:
    from workbench.gui.plot_axes import format_seq_len

    if not seq_lens:
        return ""
    if len(seq_lens) <= 3:
        return ", ".join(format_seq_len(n) for n in seq_lens)
    return f"{format_seq_len(seq_lens[0])} … {format_seq_len(seq_lens[-1])} ({len(seq_lens)})"


def problem_summary(run: Any) -> str:
    axis = getattr(run, "axis", "seq_len")
    return f"{run.problem.summary(axis)} · {run.config.summary_for(run.backend, run.own_knobs)}"


class RunsModel(QAbstractTableModel):
    """Runs, newest first, fetched a page at a time. Label cells are editable (relabel)."""

    PAGE = 200
    storeFailed = Signal(str)  # a store error while reading or relabelling

    def __init__(self, store: Any, parent: Any = None) -> None:
        super().__init__(parent)
        self._store = store
        self._search: str | None = None
        self._machine: str | None = None  # History's machine filter ("GPU on host"), or all
        self._runs: list[Any] = []  # RunRecord
        self._total = 0
        # Run id → the Config tooltip's tuned lines, read from the run's points on the first
        # hover (never while painting: a page of rows would cost a points query per row).
        self._tuned_tips: dict[int, str] = {}
        self.refresh()

    # ---- loading --------------------------------------------------------------------------------
    def set_store(self, store: Any) -> None:
        self._store = store
        self._machine = None  # another file's machines mean nothing here
        self.refresh()

    def set_search(self, text: str) -> None:
        self._search = text.strip() or None
        self.refresh()

    @property
    def search(self) -> str | None:
        return self._search

    def set_machine(self, machine: str | None) -> None:
        """Only the runs of ``machine`` (a name from the store's machines), or all (None)."""
        self._machine = machine or None
        self.refresh()

    def total(self) -> int:
        return self._total

    def refresh(self) -> None:
        """Start again from the first page (new runs, deletions, a new filter)."""
        self.beginResetModel()
        self._runs = []
        self._total = 0
        self._tuned_tips = {}
        if self._store is not None:
            try:
                self._total = self._store.count_runs(self._search, self._machine)
                self._runs = self._store.runs(
                    self._search, limit=self.PAGE, offset=0, machine=self._machine
                )
            except Exception as exc:
                self.storeFailed.emit(str(exc))
        self.endResetModel()

    def canFetchMore(self, parent: AnyIndex = QModelIndex()) -> bool:  # noqa: B008
        return not parent.isValid() and len(self._runs) < self._total

    def fetchMore(self, parent: AnyIndex = QModelIndex()) -> None:  # noqa: B008
        if parent.isValid() or self._store is None:
            return
        try:
            page = self._store.runs(
                self._search, limit=self.PAGE, offset=len(self._runs), machine=self._machine
            )
        except Exception as exc:
            self.storeFailed.emit(str(exc))
            self._total = len(self._runs)  # stop asking until the next refresh
            return
        if not page:
            self._total = len(self._runs)  # rows were deleted elsewhere since counting
            return
        first = len(self._runs)
        self.beginInsertRows(QModelIndex(), first, first + len(page) - 1)
        self._runs.extend(page)
        self.endInsertRows()

    def fetch_all(self) -> None:
        while self.canFetchMore():
            self.fetchMore()

    # ---- access ---------------------------------------------------------------------------------
    def run_at(self, row: int) -> Any:
        return self._runs[row]

    def row_of(self, run_id: int) -> int | None:
        for row, run in enumerate(self._runs):
            if run.id == run_id:
                return row
        return None

    def replace_run(self, run: Any) -> None:
        """Put a fresher record of a loaded run in place (status or label changed)."""
        row = self.row_of(run.id)
        if row is None:
            return
        self._runs[row] = run
        self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))

    # ---- Qt model -------------------------------------------------------------------------------
    def rowCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._runs)

    def columnCount(self, parent: AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def flags(self, index: AnyIndex) -> Qt.ItemFlag:
        base = super().flags(index)
        if index.isValid() and index.column() == COL_LABEL and not self._read_only():
            return base | Qt.ItemFlag.ItemIsEditable
        return base

    def _read_only(self) -> bool:
        return self._store is None or bool(getattr(self._store, "read_only", False))

    def data(self, index: AnyIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        run = self._runs[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(run, col)
        if role == Qt.ItemDataRole.EditRole and col == COL_LABEL:
            return run.label
        if role == Qt.ItemDataRole.DecorationRole and col == COL_ID:
            return run_color(run.id)
        if role == Qt.ItemDataRole.ForegroundRole and col == COL_STATUS:
            return STATUS_COLORS.get(run.status)
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == COL_STATUS and run.error:
                return run.error
            if col == COL_GPU:
                return ", ".join(f"{k}: {v}" for k, v in sorted(run.machine.items()) if v)
            if col == COL_CONFIG:
                return self._config_tooltip(run)
            if col == COL_LABEL:
                return "Double-click to relabel"
        if role == Qt.ItemDataRole.UserRole:
            return run.id
        return None

    def _config_tooltip(self, run: Any) -> str:
        """The config, for an autotuned run what the tuner launched at each length, and for a
        cuTile run what each length's launch compiled to."""
        return "\n".join([problem_summary(run), *self._points_tip(run)])

    def _points_tip(self, run: Any) -> list[str]:
        # A plugin run (it records its knobs) may store what it compiled to (compile_cubin).
        plugin = "plugin_knobs" in (run.machine or {})
        looks = run.config.tuned or compiled_from_registry(run.backend) or plugin
        if not looks or self._store is None:
            return []  # the form's config is what ran and nothing was compiled: no lookup
        if run.id in self._tuned_tips:
            return self._tuned_tips[run.id].splitlines()
        try:
            points = self._store.points(run.id)
        except Exception:  # a hover is no place for an error box; the tooltip says less
            return []
        lines = []
        tuned = tuned_lines(tuned_labels(run.config.tuned, points))
        if tuned:
            lines += ["Tuned per sequence length:", tuned]
        compiled = [(p.seq_len, compiled_of(p)) for p in points]
        if any(found for _, found in compiled):
            lines.append("Compiled per sequence length:")
            for n, found in compiled:
                if found:
                    res = CompiledResources.from_dict(found)
                    lines.append(f"  N={n:,}: {res.summary()}")
                    if res.key_block():
                        lines.append(f"    {res.key_block()}")
        text = "\n".join(lines)
        if run.status != "running":  # a running sweep still gains points
            self._tuned_tips[run.id] = text
        return text.splitlines()

    def _text(self, run: Any, col: int) -> str:
        if col == COL_ID:
            return str(run.id)
        if col == COL_LABEL:
            return run.label
        if col == COL_CREATED:
            return format_created(run.created_at)
        if col == COL_BACKEND:
            return run.backend
        if col == COL_GPU:
            return str(run.machine.get("gpu_name") or ("CPU" if run.backend == "reference" else ""))
        if col == COL_CONFIG:
            return problem_summary(run)
        if col == COL_SEQ:
            shown = format_seq_lens(run.seq_lens)
            # A decode sweep's lengths are key lengths at the fixed q_len its config shows.
            return f"k_len {shown}" if getattr(run, "axis", "seq_len") == "k_len" else shown
        if col == COL_STATUS:
            return run.status
        return ""

    def setData(self, index: AnyIndex, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        if role != Qt.ItemDataRole.EditRole or index.column() != COL_LABEL or self._store is None:
            return False
        return self.relabel([self._runs[index.row()].id], str(value))

    def relabel(self, run_ids: list[int], label: str) -> bool:
        """Relabel in the store, then in the loaded rows. False (and storeFailed) on error."""
        label = label.strip()
        try:
            for run_id in run_ids:
                self._store.relabel(run_id, label)
        except Exception as exc:
            self.storeFailed.emit(str(exc))
            return False
        for run_id in run_ids:
            row = self.row_of(run_id)
            if row is not None:
                self.replace_run(dataclasses.replace(self._runs[row], label=label))
        return True
