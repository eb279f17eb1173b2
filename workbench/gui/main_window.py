"""The main window: lays out the form, the views, History and the status bar, and wires them.

The window renders and sends commands; small objects beside it do the rest: the open database
(:mod:`workbench.gui.database_session`), the running job (:mod:`workbench.gui.job_runner`), the
exports (:mod:`workbench.gui.exports`) and what is kept of the window's shape between sessions
(:mod:`workbench.gui.window_state`). Views are refreshed from the store, the one source of
truth, whenever the selection changes or a point arrives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings, Qt, QThread, QTimer, Slot
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import QLabel, QMainWindow, QMessageBox, QSplitter, QTabWidget

from workbench.analysis.compare import run_name
from workbench.gui import _pyside_fix, window_state
from workbench.gui.compare import ComparePanel
from workbench.gui.controls import ControlsPanel
from workbench.gui.database_session import DatabaseSession
from workbench.gui.explain import Explainers
from workbench.gui.exports import Exports
from workbench.gui.heatmap import HeatmapPanel
from workbench.gui.history import HistoryPanel
from workbench.gui.job_runner import JobRunner
from workbench.gui.ladder import LadderPanel
from workbench.gui.plots import PlotsPanel
from workbench.gui.plugin_menu import PluginMenu
from workbench.gui.worker import ProbeWorker, start_in_thread
from workbench.run.engine import use_fork_server
from workbench.store import Store, StoreError, default_db_path, env_db_path

MACHINE_LABEL_WIDTH = 380  # px of the status bar's backend line; the rest is for messages
MAX_PLOTTED = 12  # more overlaid runs than this is unreadable, and costs a query each


class MainWindow(QMainWindow):
    """The workbench. ``timing`` overrides the backends' timing (tests use tiny settings)."""

    def __init__(
        self,
        db_path: str | Path | None = None,
        *,
        settings: QSettings | None = None,
        timing: Any = None,
        probe_backends: bool = True,
    ) -> None:
        _pyside_fix.apply()  # idempotent; see the module (PySide6 6.12.0 on Python < 3.12)
        use_fork_server()  # every sweep, and every cancel, starts a child; idempotent
        super().__init__()
        self.settings = settings if settings is not None else QSettings()
        self.jobs = JobRunner(self, timing)
        self.database = DatabaseSession(
            self,
            on_changed=self._set_store,
            on_imported=self._on_imported,
            busy=self.jobs.is_running,
            status=self.show_status,
            warn=self.warn,
        )
        self.exports = Exports(self)
        self._probe: ProbeWorker | None = None
        self._probe_thread: QThread | None = None
        self.backend_statuses: dict[str, Any] = {}
        self._status_before_plotting = ""  # a line the next selection's note must not replace
        # A group's members finish a length together: their points redraw the views once.
        self._views_timer = QTimer(self)
        self._views_timer.setSingleShot(True)
        self._views_timer.setInterval(0)
        self._views_timer.timeout.connect(lambda: self._on_selection(self.history.selected_ids()))

        self.setWindowTitle("")  # Qt shows the application display name
        self._build_widgets()
        self._build_menus()
        window_state.restore_settings(self)
        self.explain.show_compiled()  # the restored form's config, before any edit

        # As for the CLI: a path given, else $FMHA_WORKBENCH_DB, then the last one used.
        path = (
            Path(db_path) if db_path else env_db_path() or window_state.saved_db_path(self.settings)
        )
        self.database.open(path or default_db_path(), show_errors=False)

        if probe_backends:
            self.start_backend_probe()

    # ---- construction ---------------------------------------------------------------------------
    def _build_widgets(self) -> None:
        self.controls = ControlsPanel()
        self.controls.runRequested.connect(self.jobs.start_run)
        self.controls.cancelRequested.connect(self.jobs.cancel)

        self.plots = PlotsPanel()
        self.heatmap = HeatmapPanel(self.database.block_map)
        self.compare = ComparePanel()
        self.ladder = LadderPanel(self.database.block_map)
        self.ladder.runRequested.connect(self.jobs.start_ladder)
        self.ladder.cancelRequested.connect(self.jobs.cancel)
        self.ladder.exportRequested.connect(self.exports.ladder_csv)
        self.ladder.message.connect(self.show_status)
        self.tabs = QTabWidget()
        self.tabs.setObjectName("view_tabs")
        self.tabs.addTab(self.plots, "Plots")
        self.tabs.addTab(self.heatmap, "Block map")
        self.tabs.addTab(self.compare, "Compare")
        self.tabs.addTab(self.ladder, "Ladder")
        # The compiled line under the form, the Roofline tab, Profile beside the Block map.
        self.explain = Explainers(self)

        self.history = HistoryPanel(None)
        self.history.selectionChangedIds.connect(self._on_selection)
        self.history.loadRequested.connect(self._on_load_requested)
        self.history.ladderRequested.connect(self.open_ladder)
        self.history.groupCompareRequested.connect(self.open_group_compare)
        self.history.relabelled.connect(self._on_relabelled)
        self.history.runsDeleted.connect(self._on_runs_deleted)
        self.history.message.connect(self.show_status)

        self.right_split = QSplitter(Qt.Orientation.Vertical)
        self.right_split.setObjectName("right_split")
        self.right_split.addWidget(self.tabs)
        self.right_split.addWidget(self.history)
        self.right_split.setStretchFactor(0, 3)
        self.right_split.setStretchFactor(1, 2)
        self.main_split = QSplitter(Qt.Orientation.Horizontal)
        self.main_split.setObjectName("main_split")
        self.main_split.addWidget(self.controls)
        self.main_split.addWidget(self.right_split)
        self.main_split.setStretchFactor(1, 1)
        self.main_split.setCollapsible(0, False)
        self.setCentralWidget(self.main_split)

        bar = self.statusBar()
        self.machine_label = QLabel("Probing backends…")
        self.machine_label.setObjectName("machine_label")
        # A bounded, separated label, so a long status message (a damaged database's) never runs
        # into the backend line; the full line is the tooltip.
        self.machine_label.setMaximumWidth(MACHINE_LABEL_WIDTH)
        self.machine_label.setStyleSheet(
            "QLabel#machine_label { border-left: 1px solid #b0b0b0; padding-left: 10px; "
            "margin-left: 12px; color: #333; }"
        )
        # Permanent widgets: showMessage() hides the ordinary ones while a message is shown.
        bar.addPermanentWidget(self.jobs.progress_label)
        bar.addPermanentWidget(self.jobs.progress)
        bar.addPermanentWidget(self.machine_label)
        window_state.fit_to_screen(self)
        self.tab_shares = window_state.TabShares(self.tabs, self.right_split, self.height())

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.open_action = self._action(
            file_menu, "&Open database…", self.database.choose, QKeySequence.StandardKey.Open
        )
        self.import_action = self._action(file_menu, "&Import runs…", self.database.choose_import)
        self.upgrade_action = self._action(file_menu, "&Upgrade database", self.database.upgrade)
        self.export_csv_action = self._action(
            file_menu, "Export &CSV…", self._on_export_csv, "Ctrl+E"
        )
        self.export_png_action = self._action(
            file_menu, "Export plots as &PNG…", self.exports.plots_png, "Ctrl+Shift+E"
        )
        file_menu.addSeparator()
        self.plugin_menu = PluginMenu(self, file_menu)  # Add kernel…, and its edit-and-rerun
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        run_menu = self.menuBar().addMenu("&Run")
        self.run_action = self._action(run_menu, "&Run sweep", self.jobs.start_run, "Ctrl+R")
        self.run_ladder_action = self._action(
            run_menu, "Run &ladder", self.jobs.start_ladder, "Ctrl+L"
        )
        self.cancel_action = self._action(run_menu, "&Cancel the run", self.jobs.cancel, "Esc")
        self.cancel_action.setEnabled(False)
        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&About", self._on_about)

    def _action(self, menu: Any, text: str, slot: Any, shortcut: Any = None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    # ---- database -------------------------------------------------------------------------------
    @property
    def store(self) -> Store | None:
        """The open run database (None: none is open)."""
        return self.database.store

    def _set_store(self, store: Store | None, path: Path) -> None:
        self.history.set_store(store)
        self.heatmap.set_run(None)
        self.ladder.set_store(store)
        self._on_selection(self.history.selected_ids())
        # Qt appends " — FMHA Workbench", the display name.
        read_only = store is not None and store.read_only and store.upgrade_from is None
        self.setWindowTitle(f"{path} (read-only)" if read_only else str(path))
        if store is None:
            reason = "No run database is open (File › Open database…)"
        elif store.read_only and store.upgrade_from is None:
            reason = store.notice or "The database is open read-only"
        else:
            reason = ""  # an older schema is upgraded when a run starts
        self.upgrade_action.setEnabled(store is not None and store.upgrade_from is not None)
        self.controls.set_can_run(not reason, reason)
        self.ladder.set_can_run(not reason, reason)

    def _on_imported(self, result: Any) -> None:
        self.history.refresh(keep_selection=False)
        self.ladder.refresh_groups()
        if result.added:
            # The selection reaches the plots after the import's line is shown: keep the line.
            self._status_before_plotting = result.line()[:1].upper() + result.line()[1:]
            self.history.select_runs(list(result.added))

    # ---- backends -------------------------------------------------------------------------------
    def start_backend_probe(self) -> None:
        """Ask which backends work in a worker thread; the window shows without waiting."""
        self._probe = ProbeWorker()
        self._probe.probed.connect(self._on_probed)
        self._probe_thread = start_in_thread(self._probe, self)

    @Slot(object, str)
    def _on_probed(self, statuses: dict[str, Any], summary: str) -> None:
        self.backend_statuses = dict(statuses)
        if statuses:
            self.controls.set_backend_statuses(statuses)
        metrics = self.machine_label.fontMetrics()
        room = MACHINE_LABEL_WIDTH - 24  # the label's border, padding and margin
        # The line without its parenthesised why ("CPU reference backend (CuPy is not
        # installed: …)" was always cut mid-reason); the tooltip has all of it.
        short = summary.split(" (", 1)[0] if summary else summary
        self.machine_label.setText(metrics.elidedText(short, Qt.TextElideMode.ElideRight, room))
        self.machine_label.setToolTip(
            "\n".join([summary, ""] + [f"{name}: {s.reason}" for name, s in statuses.items()])
        )

    # ---- selection and views --------------------------------------------------------------------
    def _runs_for(self, ids: list[int]) -> list[Any]:
        runs = []
        for run_id in ids:
            row = self.history.model.row_of(run_id)
            if row is not None:
                runs.append(self.history.model.run_at(row))
        return runs

    def _points_for(self, run_ids: list[int]) -> dict[int, list[Any]]:
        if self.store is None:  # no database (or after shutdown): runs without points
            return {run_id: [] for run_id in run_ids}
        points: dict[int, list[Any]] = {}
        for run_id in run_ids:
            try:
                points[run_id] = self.store.points(run_id)
            except (StoreError, OSError) as exc:
                self.show_status(str(exc))
                points[run_id] = []
        return points

    @Slot(list)
    def _on_selection(self, ids: list[int]) -> None:
        shown = ids[:MAX_PLOTTED]
        kept, self._status_before_plotting = self._status_before_plotting, ""
        if len(ids) > MAX_PLOTTED:
            plotting = f"plotting the first {MAX_PLOTTED} of {len(ids)} selected runs"
            self.show_status(f"{kept}; {plotting}" if kept else f"P{plotting[1:]}")
        runs = self._runs_for(shown)
        points = self._points_for([r.id for r in runs])
        ceilings = self.explain.ceilings(runs)  # for each point's % of roofline
        self.plots.set_series(
            [
                self.explain.series(r, self._series_name(r), points[r.id], ceilings.get(r.id))
                for r in runs
            ]
        )
        self.compare.set_runs(runs, points, ceilings)
        focus = self._focused_run(runs)
        if focus is None:
            self.heatmap.set_run(None)
        else:
            self._show_heatmap(focus, points[focus.id])
        self.explain.show_selection(runs)

    def _focused_run(self, runs: list[Any]) -> Any:
        """The run the heatmap shows: the table's current row if selected, else the first."""
        if not runs:
            return None
        current = self.history.table.currentIndex()
        if current.isValid():
            run = self.history.model.run_at(current.row())
            if any(r.id == run.id for r in runs):
                return run
        return runs[0]

    def _show_heatmap(self, run: Any, points: list[Any]) -> None:
        self.heatmap.set_run(
            run, [p.seq_len for p in points], {p.seq_len: p.extra or {} for p in points}
        )

    def refresh_run_views(self, run_id: int) -> None:
        """A run gained points or changed status: update its curves, the heatmap and compare."""
        if run_id in self.history.selected_ids():
            self._views_timer.start()  # coalesced: one redraw for a burst of events

    @staticmethod
    def _series_name(run: Any) -> str:
        """Compare's name for the run (a group's runs share a label, the backend tells them
        apart); an unlabelled run adds its config."""
        name = run_name(run)
        config = run.config.summary_for(run.backend, run.own_knobs)
        return name if run.label else f"{name} {config}"

    @Slot(int)
    def open_ladder(self, group_id: int) -> None:
        """Bring the Ladder tab forward on stored ladder ``group_id`` (from History)."""
        self.ladder.show_group(group_id)
        self.tabs.setCurrentWidget(self.ladder)

    @Slot(int)
    def open_group_compare(self, group_id: int) -> None:
        """Select every run of stored group ``group_id`` and show them in Compare (one unit:
        the first run, the group's first backend, is the baseline until another is picked)."""
        if self.store is None:
            return
        try:
            ids = [r.id for r in self.store.group_runs(group_id)]
        except (StoreError, OSError) as exc:
            self.show_status(str(exc))
            return
        model = self.history.model
        while any(model.row_of(i) is None for i in ids) and model.canFetchMore():
            model.fetchMore()  # an older group may lie past the loaded pages
        self.history.select_runs(ids)
        self._on_selection(self.history.selected_ids())  # now, not after the burst timer
        if ids:
            self.compare.pin_baseline(ids[0])
        self.tabs.setCurrentWidget(self.compare)
        self.show_status(f"Comparing group #{group_id}: {len(ids)} runs")

    def _on_load_requested(self, run_id: int) -> None:
        runs = self._runs_for([run_id])
        if runs:
            run = runs[0]
            self.controls.load_run(
                run.problem,
                run.config,
                run.seq_lens,
                run.backend,
                run.label,
                run.axis,
                run.machine.get("plugin_knobs"),
            )
            self.show_status(f"Loaded the settings of run #{run_id} into the form")

    @Slot(list)
    def _on_relabelled(self, ids: list[int]) -> None:
        self._on_selection(self.history.selected_ids())
        self.ladder.refresh()

    @Slot(list)
    def _on_runs_deleted(self, ids: list[int]) -> None:
        self._on_selection(self.history.selected_ids())
        self.ladder.refresh_groups()  # a group's run count, or a step gone from its ladder

    def _on_export_csv(self) -> None:
        self.history.export_selected()

    # ---- messages -------------------------------------------------------------------------------
    def show_status(self, text: str) -> None:
        self.statusBar().showMessage(text, 8000)

    def warn(self, title: str, text: str) -> None:
        QMessageBox.warning(self, title, text)

    def error(self, title: str, text: str) -> None:
        QMessageBox.critical(self, title, text)

    def _on_about(self) -> None:
        QMessageBox.about(
            self,
            "About FMHA Workbench",
            "FMHA Workbench: sweep a FlashAttention kernel's knobs, see latency, throughput and "
            "the blocks it computed, keep every run and compare them.",
        )

    # ---- closing --------------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:
        if not self.jobs.may_quit():
            event.ignore()
            return
        self.shutdown()
        event.accept()

    def shutdown(self) -> None:
        """Stop background work, save settings and close the store (idempotent)."""
        self.jobs.stop()
        self.plugin_menu.stop()
        self.history.csv_job.stop()
        self.explain.shutdown()
        if self._probe is not None:
            self._probe.blockSignals(True)
        if self._probe_thread is not None:
            self._probe_thread.quit()  # returns once the probe is done
            self._probe_thread.wait()
        self._probe_thread = None
        self._probe = None
        window_state.save_settings(self)
        if self.store is not None:
            self.database.close()
            # Nothing may read the closed connection later (a late scroll, a queued refresh).
            self.history.set_store(None)
            self.ladder.set_store(None)
