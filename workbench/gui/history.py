"""The run history: a lazy table over the store, with filter, relabel, delete and CSV export.

The table's model is :class:`~workbench.gui.history_model.RunsModel` (a page of runs at a time).
The panel turns user actions into store calls and reports store errors in a message box; it
never decides anything about the runs themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QItemSelection, QItemSelectionModel, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
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

from workbench.gui.csv_dialog import ask_csv_path, may_replace
from workbench.gui.csv_export_job import CsvExportJob
from workbench.gui.history_model import (
    COL_CONFIG,
    COL_LABEL,
    COL_STATUS,
    COLUMNS,
    STATUS_COLORS,
    RunsModel,
    format_created,
    format_seq_lens,
    problem_summary,
)
from workbench.jobs.ladder_steps import is_ladder_group

ALL_MACHINES = "All machines"

# The names other modules and tests import from here since before the model had its module.
__all__ = [
    "COL_CONFIG",
    "COL_LABEL",
    "COL_STATUS",
    "STATUS_COLORS",
    "HistoryPanel",
    "RunsModel",
    "ask_csv_path",
    "format_created",
    "format_seq_lens",
    "may_replace",
    "problem_summary",
]


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
