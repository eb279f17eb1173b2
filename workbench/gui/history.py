"""The run history: a lazy table over the store, with filter, relabel, delete and CSV export.

The model pages through ``store.runs(limit, offset)`` as the view scrolls (``canFetchMore`` /
``fetchMore``), so a database of thousands of runs opens with one small query and scrolling only
ever parses the next page. The panel turns user actions into store calls and reports store errors
in a message box; it never decides anything about the runs themselves.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QItemSelection,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QAction, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from workbench.compare import compiled_of
from workbench.gui.colors import run_color
from workbench.gui.csv_export_job import CsvExportJob
from workbench.ladder import is_ladder_group
from workbench.resources import COMPILED_BACKENDS, CompiledResources
from workbench.tuned import tuned_labels, tuned_lines

ALL_MACHINES = "All machines"
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
    from workbench.gui.plots import format_seq_len

    if not seq_lens:
        return ""
    if len(seq_lens) <= 3:
        return ", ".join(format_seq_len(n) for n in seq_lens)
    return f"{format_seq_len(seq_lens[0])} … {format_seq_len(seq_lens[-1])} ({len(seq_lens)})"


def problem_summary(run: Any) -> str:
    axis = getattr(run, "axis", "seq_len")
    return f"{run.problem.summary(axis)} · {run.config.summary_for(run.backend)}"


def ask_csv_path(parent: QWidget, title: str, start: Path) -> Path | None:
    """The save dialog for a CSV export; None when cancelled. Adds .csv when no suffix is given
    (and asks before replacing an existing file of that name: the dialog never saw it)."""
    path, _ = QFileDialog.getSaveFileName(
        parent, title, str(start), "CSV files (*.csv);;All files (*)"
    )
    if not path:
        return None
    target = Path(path)
    target = target if target.suffix else target.with_suffix(".csv")
    return target if may_replace(parent, Path(path), target) else None


def may_replace(parent: QWidget, chosen: Path, target: Path) -> bool:
    """True unless ``target`` (the dialog's ``chosen`` name with a suffix added or replaced)
    already exists and the user declines to replace it. The save dialog confirms only the
    name it returned, so a file the window names itself is confirmed here."""
    if target == chosen or not (target.exists() or target.is_symlink()):
        return True
    answer = QMessageBox.question(
        parent,
        "Replace the file?",
        f"{target} already exists.\n\nReplace it? (You chose {chosen.name}; the export "
        f"adds {target.suffix}.)",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


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
        looks = run.config.tuned or run.backend in COMPILED_BACKENDS
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


class HistoryPanel(QWidget):
    """Filter box, the runs table and the actions on selected runs."""

    selectionChangedIds = Signal(list)  # run ids, in table order
    loadRequested = Signal(int)  # put this run's settings into the form
    ladderRequested = Signal(int)  # show this ladder group in the Ladder tab
    groupCompareRequested = Signal(int)  # compare every run of this group
    runsDeleted = Signal(list)
    relabelled = Signal(list)
    message = Signal(str)  # a line for the status bar

    def __init__(self, store: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = RunsModel(store, self)
        self.model.storeFailed.connect(self._on_store_failed)
        self.last_export: Path | None = None
        self.csv_job = CsvExportJob(self)
        self.export_dir = ""  # where the export dialog opens; the window remembers it

        self.filter = QLineEdit()
        self.filter.setObjectName("history_filter")
        self.filter.setPlaceholderText("Filter by label, backend, status, config, GPU or id…")
        self.filter.setClearButtonEnabled(True)
        # Debounced: a query per keystroke would stall typing on a large database.
        self._filter_timer = QTimer(self)
        self._filter_timer.setSingleShot(True)
        self._filter_timer.setInterval(250)
        self._filter_timer.timeout.connect(self.apply_filter)
        self.filter.textChanged.connect(self._filter_timer.start)

        self._selection_timer = QTimer(self)
        self._selection_timer.setSingleShot(True)
        self._selection_timer.setInterval(0)
        self._selection_timer.timeout.connect(self._emit_selection)

        self.count_label = QLabel()
        self.count_label.setObjectName("history_count")
        # Runs from several machines (File › Import runs…): show one machine's, or all.
        self.machine_filter = QComboBox()
        self.machine_filter.setObjectName("history_machine")
        self.machine_filter.setToolTip("Show the runs of one machine (GPU on host), or all")
        self.machine_filter.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.machine_filter.setMinimumContentsLength(12)
        self.machine_filter.currentIndexChanged.connect(self._on_machine_picked)
        self.machine_filter.hide()  # until runs come from two machines (refresh_machines)

        self.table = QTableView()
        self.table.setObjectName("history_table")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked
            | QAbstractItemView.EditTrigger.EditKeyPressed
        )
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        # Fixed row heights and no per-cell content sizing keep scrolling 5,000 rows cheap.
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.table.verticalHeader().setDefaultSectionSize(22)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        for col, width in zip(
            range(len(COLUMNS)), (64, 180, 118, 90, 150, 330, 120, 80), strict=True
        ):
            self.table.setColumnWidth(col, width)
        header.setSectionResizeMode(COL_CONFIG, QHeaderView.ResizeMode.Stretch)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._on_context_menu)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.model.modelReset.connect(self._update_count)
        self.model.rowsInserted.connect(self._update_count)

        self.load_button = QPushButton("Load into form")
        self.load_button.setToolTip("Put the selected run's settings into the controls")
        self.load_button.clicked.connect(self._on_load)
        self.relabel_button = QPushButton("Relabel…")
        self.relabel_button.clicked.connect(self.relabel_selected)
        self.delete_button = QPushButton("Delete…")
        self.delete_button.clicked.connect(self.delete_selected)
        self.export_button = QPushButton("Export CSV…")
        self.export_button.setToolTip("Export the selected runs (all runs when none is selected)")
        self.export_button.clicked.connect(self._on_export_clicked)
        self.ladder_button = QPushButton("Open ladder")
        self.ladder_button.setToolTip("Show the ladder the selected run is a step of")
        self.ladder_button.clicked.connect(self._on_open_ladder)
        self.group_button = QPushButton("Compare group")
        self.group_button.setObjectName("compare_group_button")
        self.group_button.setToolTip("Compare every run of the group the selected runs are in")
        self.group_button.clicked.connect(self._on_compare_group)

        top = QHBoxLayout()
        top.addWidget(self.filter, 1)
        top.addWidget(self.machine_filter)
        top.addWidget(self.count_label)
        # Beside the filter, which can give up width: one more button in the row below would
        # widen the whole window's minimum size.
        top.addWidget(self.ladder_button)
        top.addWidget(self.group_button)
        buttons = QHBoxLayout()
        for button in (
            self.load_button,
            self.relabel_button,
            self.delete_button,
            self.export_button,
        ):
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        self._update_count()
        self._update_buttons()

    # ---- store ----------------------------------------------------------------------------------
    def set_store(self, store: Any) -> None:
        self.machine_filter.blockSignals(True)
        self.machine_filter.clear()  # another file's machines mean nothing here
        self.machine_filter.blockSignals(False)
        self.model.set_store(store)
        self.refresh_machines()
        self._update_buttons()

    def refresh_machines(self) -> None:
        """List the machines the runs come from; keep the one picked if it is still there."""
        keep = self.machine_filter.currentData()
        machines: list[str] = []
        if self.store is not None:
            try:
                machines = self.store.machines()
            except Exception as exc:
                self._on_store_failed(str(exc))
        self.machine_filter.blockSignals(True)
        self.machine_filter.clear()
        self.machine_filter.addItem(ALL_MACHINES, None)
        for name in machines:
            self.machine_filter.addItem(name, name)
        index = self.machine_filter.findData(keep) if keep else 0
        self.machine_filter.setCurrentIndex(max(index, 0))
        self.machine_filter.blockSignals(False)
        if keep and index < 0:
            self.model.set_machine(None)  # its runs are gone
        # One machine needs no filter; shown once there are runs from two.
        self.machine_filter.setVisible(len(machines) > 1)

    def _on_machine_picked(self, index: int) -> None:
        ids = self.selected_ids()
        self.model.set_machine(self.machine_filter.itemData(index))
        self.select_runs(ids)

    @property
    def store(self) -> Any:
        return self.model._store

    def refresh(self, keep_selection: bool = True) -> None:
        ids = self.selected_ids() if keep_selection else []
        self.refresh_machines()
        self.model.refresh()
        if ids:
            self.select_runs(ids)
        else:
            self._on_selection_changed()

    def refresh_run(self, run_id: int) -> None:
        """Re-read one run (its status changed) without resetting the table."""
        if self.store is None:
            return
        try:
            self.model.replace_run(self.store.run(run_id))
        except Exception as exc:
            self._on_store_failed(str(exc))

    def apply_filter(self) -> None:
        self._filter_timer.stop()
        ids = self.selected_ids()
        self.model.set_search(self.filter.text())
        self.select_runs(ids)

    # ---- selection ------------------------------------------------------------------------------
    def selected_ids(self) -> list[int]:
        rows = sorted(index.row() for index in self.table.selectionModel().selectedRows())
        return [self.model.run_at(row).id for row in rows]

    def select_runs(self, run_ids: list[int]) -> None:
        """Select these runs where they are loaded (new runs are on the first page)."""
        selection = QItemSelection()
        for run_id in run_ids:
            row = self.model.row_of(run_id)
            if row is not None:
                selection.select(self.model.index(row, 0), self.model.index(row, len(COLUMNS) - 1))
        flags = QItemSelectionModel.SelectionFlag.ClearAndSelect
        self.table.selectionModel().select(selection, flags)
        if run_ids and (row := self.model.row_of(run_ids[0])) is not None:
            self.table.scrollTo(self.model.index(row, 0))
        self._on_selection_changed()

    def _on_selection_changed(self, *_: Any) -> None:
        self._update_buttons()
        # A reset, a select and a scroll can all report a change in one go; the views reload
        # from the store on each report, so collapse them into one, after the burst.
        self._selection_timer.start()

    def _emit_selection(self) -> None:
        self.selectionChangedIds.emit(self.selected_ids())

    def _update_buttons(self) -> None:
        count = len(self.table.selectionModel().selectedRows())
        writable = self.store is not None and not getattr(self.store, "read_only", False)
        self.load_button.setEnabled(count == 1)
        self.relabel_button.setEnabled(count >= 1 and writable)
        self.delete_button.setEnabled(count >= 1 and writable)
        self.export_button.setEnabled(self.store is not None)
        self.ladder_button.setEnabled(self.selected_ladder() is not None)
        self.group_button.setEnabled(self.selected_group() is not None)

    def selected_ladder(self) -> int | None:
        """The ladder group of the one selected run, or None (no run, several, or no ladder)."""
        ids = self.selected_ids()
        if len(ids) != 1 or self.store is None:
            return None
        run = self.model.run_at(self.model.row_of(ids[0]) or 0)
        if run.group_id is None:
            return None
        try:
            group = self.store.group(run.group_id)
        except Exception:  # a group deleted meanwhile, or a store error: no ladder to open
            return None
        return run.group_id if is_ladder_group(group) else None

    def selected_group(self) -> int | None:
        """The group every selected run belongs to, or None (no selection, no group, mixed)."""
        groups = {
            self.model.run_at(index.row()).group_id
            for index in self.table.selectionModel().selectedRows()
        }
        return groups.pop() if len(groups) == 1 and None not in groups else None

    def _on_compare_group(self) -> None:
        group_id = self.selected_group()
        if group_id is not None:
            self.groupCompareRequested.emit(group_id)

    def _update_count(self, *_: Any) -> None:
        total = self.model.total()
        shown = "" if self.model.search is None else " matching"
        self.count_label.setText(f"{total:,} run{'s' if total != 1 else ''}{shown}")

    # ---- actions --------------------------------------------------------------------------------
    def _on_load(self) -> None:
        ids = self.selected_ids()
        if len(ids) == 1:
            self.loadRequested.emit(ids[0])

    def _on_open_ladder(self) -> None:
        group_id = self.selected_ladder()
        if group_id is not None:
            self.ladderRequested.emit(group_id)

    def relabel_selected(self) -> None:
        ids = self.selected_ids()
        if not ids:
            return
        current = self.model.run_at(self.model.row_of(ids[0]) or 0).label
        title = "Relabel run" if len(ids) == 1 else f"Relabel {len(ids)} runs"
        label, ok = QInputDialog.getText(
            self, title, "New label:", QLineEdit.EchoMode.Normal, current
        )
        if ok and self.model.relabel(ids, label):
            self.relabelled.emit(ids)
            self.message.emit(f"Relabelled {len(ids)} run{'s' if len(ids) != 1 else ''}")

    def delete_selected(self) -> None:
        ids = self.selected_ids()
        if not ids:
            return
        shown = ", ".join(f"#{i}" for i in ids[:8]) + (" …" if len(ids) > 8 else "")
        answer = QMessageBox.question(
            self,
            "Delete runs",
            f"Delete {len(ids)} run{'s' if len(ids) != 1 else ''} ({shown}) and all their points?"
            "\n\nThis cannot be undone.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        if answer != QMessageBox.StandardButton.Yes:
            return
        try:
            self.store.delete_runs(ids)
        except Exception as exc:
            self._on_store_failed(str(exc))
            return
        self.refresh(keep_selection=False)
        self.runsDeleted.emit(ids)
        self.message.emit(f"Deleted {len(ids)} run{'s' if len(ids) != 1 else ''}")

    def export_selected(self) -> Path | None:
        ids = self.selected_ids()
        what = f"{len(ids)} selected run{'s' if len(ids) != 1 else ''}" if ids else "all runs"
        start = Path(self.export_dir or Path.home()) / "fmha-runs.csv"
        target = ask_csv_path(self, f"Export {what} to CSV", start)
        if target is None or not self.csv_job.start(target, ids, what):  # a job: never frozen
            return None
        self.export_dir = str(target.parent)
        return target

    def _on_export_clicked(self) -> None:
        # clicked/triggered pass a "checked" flag; export_selected takes none.
        self.export_selected()

    def context_menu(self) -> QMenu:
        """The right-click menu: the panel's buttons, enabled alike."""
        menu = QMenu(self)
        for text, slot, button in (
            ("Load into form", self._on_load, self.load_button),
            ("Relabel…", self.relabel_selected, self.relabel_button),
            ("Delete…", self.delete_selected, self.delete_button),
            ("Export CSV…", self._on_export_clicked, self.export_button),
            ("Open ladder", self._on_open_ladder, self.ladder_button),
            ("Compare group", self._on_compare_group, self.group_button),
        ):
            action = QAction(text, menu)
            action.setEnabled(button.isEnabled())
            action.triggered.connect(slot)
            menu.addAction(action)
        return menu

    def _on_context_menu(self, pos: Any) -> None:
        menu = self.context_menu()
        self.exec_menu(menu, self.table.viewport().mapToGlobal(pos))
        menu.deleteLater()

    def exec_menu(self, menu: QMenu, global_pos: Any) -> Any:
        """Show ``menu`` modally (a seam: tests pick an action instead of waiting for a mouse)."""
        return menu.exec(global_pos)

    def _on_store_failed(self, text: str) -> None:
        QMessageBox.warning(self, "Database", text)
        self.message.emit(text)
