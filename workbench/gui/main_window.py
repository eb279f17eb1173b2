"""The main window: wires the controls, the worker, the plots, the heatmap, history, compare and
the ladder view.

It owns the GUI thread's Store (reading, relabelling, deleting) and starts one SweepWorker per job
(the core's: :mod:`workbench.jobs`); the job opens its own Store on the same file. Every worker
signal lands on a bound method of this window (docs/design.md trap: never a lambda). The job's
events feed the core's progress model (:mod:`workbench.progress`), which the status bar renders;
views are refreshed from the store, the one source of truth, whenever the selection changes or a
point arrives.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QSettings, QSize, Qt, QThread, QTimer, Slot
from PySide6.QtGui import QAction, QCloseEvent, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QSplitter,
    QTabWidget,
)

from workbench import events as ev
from workbench.compare import run_name
from workbench.config import ConfigError
from workbench.gui import _pyside_fix
from workbench.gui.compare import ComparePanel
from workbench.gui.controls import ControlsPanel
from workbench.gui.heatmap import HeatmapPanel
from workbench.gui.history import HistoryPanel, ask_csv_path, may_replace
from workbench.gui.ladder import LadderPanel
from workbench.gui.plots import PlotsPanel, Series
from workbench.gui.worker import ProbeWorker, SweepWorker, start_in_thread
from workbench.progress import ProgressModel
from workbench.store import (
    Store,
    StoreError,
    data_dir_db_path,
    default_db_path,
    env_db_path,
)
from workbench.tuned import tuned_labels

GUI_BUSY_TIMEOUT_S = 0.25
PROGRESS_TICK_MS = 1000  # how often the time left is counted down during a point
# The first window's size where the screen has room; smaller screens get their available area.
PREFERRED_SIZE = (1440, 900)
# What a window manager's frame and title bar take around the client area, at most.
FRAME_ALLOWANCE = (16, 48)
# The share of the height above History a tab gets until the user drags the splitter: the
# Ladder tab's every step, its chart and a step's map need most of it.
DEFAULT_TAB_SHARE = 0.6
DEFAULT_TAB_SHARES = {3: 0.76}
MACHINE_LABEL_WIDTH = 380  # px of the status bar's backend line; the rest is for messages
MAX_PLOTTED = 12  # more overlaid runs than this is unreadable, and costs a query each
SETTINGS_VERSION = 1


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
        super().__init__()
        self.settings = settings if settings is not None else QSettings()
        self.timing = timing
        # None: a child process for backends that compute in process (workbench.jobs.background
        # decides); tests that patch a backend in this process set False.
        self.sweep_in_child: bool | None = None
        self.store: Store | None = None
        self._worker: SweepWorker | None = None
        self._thread: QThread | None = None
        self._probe: ProbeWorker | None = None
        self._probe_thread: QThread | None = None
        self._pending_notice: str | None = None
        self._quit_question: str | None = None  # the title of the open "quit now?" question
        # The running (or last) job's progress, fed by its events.
        self.progress_model: ProgressModel | None = None
        self.backend_statuses: dict[str, Any] = {}
        self.last_run_id: int | None = None
        # The time left counts down between a job's events (a long point said the same for
        # minutes).
        self._progress_timer = QTimer(self)
        self._progress_timer.setInterval(PROGRESS_TICK_MS)
        self._progress_timer.timeout.connect(self._tick_progress)
        # A group's members finish a length together: their points redraw the views once.
        self._views_timer = QTimer(self)
        self._views_timer.setSingleShot(True)
        self._views_timer.setInterval(0)
        self._views_timer.timeout.connect(lambda: self._on_selection(self.history.selected_ids()))

        self.setWindowTitle("")  # Qt shows the application display name
        self._build_widgets()
        self._build_menus()
        self._restore_settings()

        # As for the CLI: a path given, else $FMHA_WORKBENCH_DB, then the last one used.
        path = Path(db_path) if db_path else env_db_path() or self._saved_db_path()
        path = path or default_db_path()
        self.open_database(path, show_errors=False)

        if probe_backends:
            self.start_backend_probe()

    # ---- construction ---------------------------------------------------------------------------
    def _build_widgets(self) -> None:
        self.controls = ControlsPanel()
        self.controls.runRequested.connect(self.start_run)
        self.controls.cancelRequested.connect(self.cancel_run)

        self.plots = PlotsPanel()
        self.heatmap = HeatmapPanel(self._load_block_map)
        self.compare = ComparePanel()
        self.ladder = LadderPanel(self._load_block_map)
        self.ladder.runRequested.connect(self.start_ladder)
        self.ladder.cancelRequested.connect(self.cancel_run)
        self.ladder.exportRequested.connect(self.export_ladder_csv)
        self.ladder.message.connect(self._show_status)
        self.tabs = QTabWidget()
        self.tabs.setObjectName("view_tabs")
        self.tabs.addTab(self.plots, "Plots")
        self.tabs.addTab(self.heatmap, "Block map")
        self.tabs.addTab(self.compare, "Compare")
        self.tabs.addTab(self.ladder, "Ladder")

        self.history = HistoryPanel(None)
        self.history.selectionChangedIds.connect(self._on_selection)
        self.history.loadRequested.connect(self._on_load_requested)
        self.history.ladderRequested.connect(self.open_ladder)
        self.history.groupCompareRequested.connect(self.open_group_compare)
        self.history.relabelled.connect(self._on_relabelled)
        self.history.runsDeleted.connect(self._on_runs_deleted)
        self.history.message.connect(self._show_status)

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
        self.progress_label = QLabel()
        self.progress_label.setObjectName("progress_label")
        self.progress = QProgressBar()
        self.progress.setObjectName("progress")
        self.progress.setMaximumWidth(220)
        self.progress.setFormat("%v / %m points")
        self.progress.hide()
        self.progress_label.hide()
        # Permanent widgets: showMessage() hides the ordinary ones while a message is shown.
        bar.addPermanentWidget(self.progress_label)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.machine_label)
        self.fit_to_screen()
        # Each tab's share of the height above History, remembered as the user drags it: the
        # Ladder tab's table, chart and map need more than Plots do.
        self._tab_shares: dict[int, float] = dict(DEFAULT_TAB_SHARES)
        self._shown_tab = self.tabs.currentIndex()
        self._apply_tab_share(self._shown_tab)
        self.tabs.currentChanged.connect(self._on_tab_changed)

    def _apply_tab_share(self, index: int) -> None:
        total = sum(self.right_split.sizes()) or self.height()
        share = self._tab_shares.get(index, DEFAULT_TAB_SHARE)
        top = round(total * share)
        self.right_split.setSizes([top, total - top])

    def _on_tab_changed(self, index: int) -> None:
        sizes = self.right_split.sizes()
        if sum(sizes) > 0 and self._shown_tab >= 0:
            self._tab_shares[self._shown_tab] = sizes[0] / sum(sizes)
        self._shown_tab = index
        self._apply_tab_share(index)

    def tab_share(self, index: int) -> float:
        """The share of the height the tab ``index`` gets above History (its own, or the
        default)."""
        if index == self.tabs.currentIndex():
            sizes = self.right_split.sizes()
            return sizes[0] / sum(sizes) if sum(sizes) else 0.0
        return self._tab_shares.get(index, DEFAULT_TAB_SHARE)

    def fit_to_screen(self) -> None:
        """The preferred size, shrunk to the screen's available geometry (a 1366x768 laptop
        showed a 1440x900 window with Run, Label and the status bar off-screen), and moved
        onto it."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            self.resize(*PREFERRED_SIZE)
            return
        room = screen.availableGeometry()
        width = min(PREFERRED_SIZE[0], room.width() - FRAME_ALLOWANCE[0])
        height = min(PREFERRED_SIZE[1], room.height() - FRAME_ALLOWANCE[1])
        size = QSize(width, height).expandedTo(self.minimumSizeHint())
        self.resize(size)
        left = room.left() + max((room.width() - size.width()) // 2, 0)
        top = room.top() + max((room.height() - size.height() - FRAME_ALLOWANCE[1]) // 2, 0)
        self.move(left, top)

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.open_action = self._action(
            file_menu, "&Open database…", self.choose_database, QKeySequence.StandardKey.Open
        )
        self.import_action = self._action(file_menu, "&Import runs…", self.choose_import)
        self.export_csv_action = self._action(
            file_menu, "Export &CSV…", self._on_export_csv, "Ctrl+E"
        )
        self.export_png_action = self._action(
            file_menu, "Export plots as &PNG…", self.export_plots_png, "Ctrl+Shift+E"
        )
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        run_menu = self.menuBar().addMenu("&Run")
        self.run_action = self._action(run_menu, "&Run sweep", self.start_run, "Ctrl+R")
        self.run_ladder_action = self._action(run_menu, "Run &ladder", self.start_ladder, "Ctrl+L")
        self.cancel_action = self._action(run_menu, "&Cancel the run", self.cancel_run, "Esc")
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
    def open_database(self, path: str | Path, *, show_errors: bool = True) -> bool:
        """Switch to the database at ``path``. A damaged or locked file never crashes the app."""
        if self.is_running():
            self._warn(
                "Database", "Wait for the running sweep to finish before switching databases."
            )
            return False
        path = Path(path).expanduser()
        if not path.parent.exists() and path != data_dir_db_path() and not self._may_create(path):
            self._show_status(f"No database opened: {path.parent} does not exist")
            if self.store is None:
                self._set_store(None, path)
            return False
        try:
            # A short busy timeout: this store writes from the GUI thread (relabel, delete), and
            # the store's retries with backoff already wait out a writer's brief commit.
            store = Store(path, busy_timeout_s=GUI_BUSY_TIMEOUT_S)
        except (StoreError, OSError) as exc:
            message = f"Cannot open the run database {path}:\n{exc}"
            if show_errors:
                self._warn("Database", message)
            else:
                # Still inside __init__: show it once the window is up.
                self._pending_notice = message
                QTimer.singleShot(0, self._show_pending_notice)
            self._show_status(str(exc))
            if self.store is None:
                self._set_store(None, Path(path))
            return False
        old, self.store = self.store, store
        if old is not None:
            old.close()
        self._set_store(store, store.path)
        if store.notice:
            self._pending_notice = store.notice
            QTimer.singleShot(0, self._show_pending_notice)
        return True

    def _may_create(self, path: Path) -> bool:
        """Ask before making folders for a database (a mistyped path would otherwise leave
        them behind); the data directory of a first start is made without asking."""
        answer = QMessageBox.question(
            self,
            "Create a run database?",
            f"The folder {path.parent} does not exist.\n\nCreate it and a new, empty run "
            f"database {path.name} in it?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        return answer == QMessageBox.StandardButton.Yes

    def _set_store(self, store: Store | None, path: Path) -> None:
        self.history.set_store(store)
        self.heatmap.set_run(None)
        self.ladder.set_store(store)
        self._on_selection(self.history.selected_ids())
        self.setWindowTitle(str(path))  # Qt appends " — FMHA Workbench", the display name
        if store is None:
            reason = "No run database is open (File › Open database…)"
        elif store.read_only:
            reason = store.notice or "The database is open read-only"
        else:
            reason = ""
        self.controls.set_can_run(not reason, reason)
        self.ladder.set_can_run(not reason, reason)

    def _show_pending_notice(self) -> None:
        notice, self._pending_notice = self._pending_notice, None
        if notice:
            # The first sentence in the status bar (the dialog has all of it).
            self._show_status(notice.splitlines()[0].split("; ")[0])
            self._warn("Database", notice)

    def choose_database(self) -> None:
        start = str(self.store.path if self.store is not None else default_db_path())
        path, _ = QFileDialog.getSaveFileName(
            self,
            "Open or create a run database",
            start,
            "Run databases (*.db);;All files (*)",
            options=QFileDialog.Option.DontConfirmOverwrite,
        )
        if path:
            self.open_database(path)

    def choose_import(self) -> None:
        """File › Import runs…: pick another run database and copy its runs in."""
        start = str(self.store.path.parent if self.store is not None else Path.home())
        path, _ = QFileDialog.getOpenFileName(
            self, "Import runs from another database", start, "Run databases (*.db);;All files (*)"
        )
        if path:
            self.import_runs(path)

    def import_runs(self, path: str | Path) -> Any:
        """Copy the runs of the database at ``path`` into the open one (each run once, with its
        machine); the result, or None after a warning that says why nothing was imported."""
        from workbench.importer import import_runs

        if self.store is None or self.is_running():
            self._warn("Import", "Open a database, and wait for the running job, to import.")
            return None
        try:
            result = import_runs(self.store, path)
        except (StoreError, OSError) as exc:
            self._warn("Import", f"Nothing was imported: {exc}")
            self._show_status(f"Nothing was imported from {path}")
            return None
        self.history.refresh(keep_selection=False)
        self.ladder.refresh_groups()
        if result.added:
            self.history.select_runs(list(result.added))
        self._show_status(result.line()[:1].upper() + result.line()[1:])
        return result

    def _load_block_map(self, run_id: int, seq_len: int) -> Any:
        if self.store is None:
            return None
        try:
            return self.store.block_map(run_id, seq_len)
        except (StoreError, OSError) as exc:
            self._show_status(str(exc))
            return None

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

    # ---- running --------------------------------------------------------------------------------
    def is_running(self) -> bool:
        return self._worker is not None

    def _form_job(self, title: str, build: Callable[[], Any]) -> Any:
        """The job the form describes, built by the core through ``build``, or None after
        telling the user why nothing can run (a bad value is marked on its field)."""
        if self.is_running():
            return None
        self.controls.clear_errors()
        if self.store is None or self.store.read_only:
            self._warn(title, "No writable run database is open (File › Open database…).")
            return None
        try:
            return build()
        except ConfigError as exc:
            self._mark(exc)
            return None

    def _mark(self, exc: ConfigError) -> None:
        self.controls.mark_error(exc.field, str(exc))
        self._show_status(str(exc))

    def start_run(self) -> None:
        """Run what the form describes: a sweep on one ticked backend, a group on several."""
        job = self._form_job("Run", self.controls.job)
        if job is not None:
            self._start_worker(job)

    def start_ladder(self) -> None:
        """Run the built-in ladder on the form's problem, lengths and backend (the Ladder tab)."""
        job = self._form_job("Ladder", self._ladder_job)
        if job is not None:
            self.tabs.setCurrentWidget(self.ladder)
            self._start_worker(job)

    def _ladder_job(self) -> Any:
        from workbench.jobs import ladder_job  # the core, only once a ladder is asked for

        # The ladder's own label, not the form's: that one names a sweep, left from the last.
        label = self.ladder.label_edit.text().strip()
        return ladder_job(self.controls.spec(), self.controls.backends.checked(), label)

    def _start_worker(self, job: Any) -> None:
        assert self.store is not None
        self.progress_model = ProgressModel.for_job(job)
        worker = SweepWorker(job, self.store.path, self.timing, in_child=self.sweep_in_child)
        worker.event.connect(self._on_event)
        worker.rejected.connect(self._on_rejected)
        worker.crashed.connect(self._on_crashed)
        # Before the thread starts: a job refused at once (a backend gone since the probe) can
        # emit done before a later connect, and the window would wait for it for ever.
        worker.done.connect(self._on_worker_done)
        self._worker = worker
        self._thread = start_in_thread(worker, self)
        self._set_running_ui(True)
        self._render_progress()
        self.progress.show()
        self.progress_label.show()
        self._progress_timer.start()

    def _tick_progress(self) -> None:
        if self.progress_model is not None and self._worker is not None:
            self.progress_label.setText(self.progress_model.live_text())

    def _render_progress(self) -> None:
        model = self.progress_model
        if model is None:
            return
        self.progress.setRange(0, model.total)
        self.progress.setValue(model.done)
        self.progress_label.setText(model.text)

    def _set_running_ui(self, running: bool) -> None:
        self.controls.set_running(running)
        self.ladder.set_running(running)
        self.run_action.setEnabled(not running)
        self.run_ladder_action.setEnabled(not running)
        self.cancel_action.setEnabled(running)

    def cancel_run(self) -> None:
        if self._worker is not None and not self._worker.cancel_requested:
            self._worker.request_cancel()
            if self.progress_model is not None:
                self.progress_model.cancelling()
                self._render_progress()
            self.controls.cancel_button.setEnabled(False)
            self.ladder.cancel_button.setEnabled(False)

    @Slot(object)
    def _on_event(self, event: Any) -> None:
        """One event of the running job: the progress model takes it, the views follow."""
        model = self.progress_model
        if model is None:
            return
        note = model.update(event)
        self._render_progress()
        if note:
            self._show_status(note)
        story = model.story
        if isinstance(event, ev.JobStarted):
            if story.selects_its_runs:
                self.history.refresh(keep_selection=False)
                self.history.select_runs(list(event.run_ids))
            if story.follows_its_group:
                self.ladder.set_live_group(event.group_id)
        elif isinstance(event, ev.RunStarted):
            self.last_run_id = event.run_id
            if not story.selects_its_runs:  # else its runs were selected when it started
                self.history.refresh(keep_selection=False)
                self.history.select_runs([event.run_id])
            self._refresh_live_ladder()
        elif isinstance(event, ev.PointFinished):
            self._refresh_run_views(event.run_id)
            self._refresh_live_ladder()
        elif isinstance(event, ev.RunFinished):
            self.history.refresh_run(event.run_id)
            self._refresh_run_views(event.run_id)
            self._refresh_live_ladder()

    def _worker_cancelling(self) -> bool:
        return self._worker is not None and self._worker.cancel_requested

    def _refresh_live_ladder(self) -> None:
        model = self.progress_model
        live = model is not None and model.story.follows_its_group and model.group_id is not None
        if live and self.ladder.group_id() == model.group_id:
            self.ladder.refresh()

    @Slot(object)
    def _on_rejected(self, exc: ConfigError) -> None:
        from workbench.jobs import LadderStepError

        if isinstance(exc, LadderStepError):
            self._warn("Ladder", f"The ladder cannot run as set:\n\n{exc}")
            self._show_status(str(exc))
        else:
            self._mark(exc)

    @Slot(str)
    def _on_crashed(self, message: str) -> None:
        model = self.progress_model
        job = model.story.noun if model is not None else "job"
        self._error(f"{job.capitalize()} stopped", f"The {job} could not run:\n\n{message}")
        self._show_status(message.splitlines()[0] if message else f"The {job} stopped")
        for run_id in model.run_ids if model is not None else ():  # every job names its runs
            self.history.refresh_run(run_id)

    @Slot()
    def _on_worker_done(self) -> None:
        if self._thread is not None:
            # done is emitted as run() returns and has already quit the thread: a short wait.
            self._thread.wait()
            self._thread.deleteLater()
        cancelled = self._worker_cancelling()
        self._thread = None
        self._worker = None
        self._close_quit_question()
        self._set_running_ui(False)
        self._progress_timer.stop()
        self.progress.hide()
        self.progress_label.hide()
        model = self.progress_model
        outcome = model.outcome(cancelled) if model is not None else None
        if model is None or outcome is None:
            return  # refused before anything was stored; _on_rejected or _on_crashed said why
        story = outcome.story
        if story.follows_its_group:
            self.ladder.set_live_group(None)
            self.ladder.show_group(model.group_id)
        if story.selects_its_runs:
            self.history.refresh(keep_selection=False)
            self.history.select_runs(list(model.run_ids))
        self._show_status(outcome.line)
        if outcome.failures:
            self._error(
                story.failure_title,
                f"{outcome.line}; {story.failure_kept}.\n\n" + "\n".join(outcome.failures),
            )

    def _close_quit_question(self) -> None:
        """The job ended while "Stop the sweep now and quit?" was up: the question is moot, so
        answer it No (the window stays, and says how the job ended)."""
        if self._quit_question is None:
            return
        for box in self.findChildren(QMessageBox):
            if box.isVisible() and box.windowTitle() == self._quit_question:
                button = box.button(QMessageBox.StandardButton.No)
                if button is not None:
                    button.click()
                else:
                    box.reject()

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
                self._show_status(str(exc))
                points[run_id] = []
        return points

    @Slot(list)
    def _on_selection(self, ids: list[int]) -> None:
        shown = ids[:MAX_PLOTTED]
        if len(ids) > MAX_PLOTTED:
            self._show_status(f"Plotting the first {MAX_PLOTTED} of {len(ids)} selected runs")
        runs = self._runs_for(shown)
        points = self._points_for([r.id for r in runs])
        self.plots.set_series(
            [
                Series(
                    r.id,
                    self._series_name(r),
                    points[r.id],
                    tuned_labels(r.config.autotune, points[r.id]),
                )
                for r in runs
            ]
        )
        self.compare.set_runs(runs, points)
        focus = self._focused_run(runs)
        if focus is None:
            self.heatmap.set_run(None)
        else:
            self._show_heatmap(focus, points[focus.id])

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

    def _refresh_run_views(self, run_id: int) -> None:
        """A run gained points or changed status: update its curves, the heatmap and compare."""
        if run_id in self.history.selected_ids():
            self._views_timer.start()  # coalesced: one redraw for a burst of events

    @staticmethod
    def _series_name(run: Any) -> str:
        """Compare's name for the run (a group's runs share a label, the backend tells them
        apart); an unlabelled run adds its config."""
        name = run_name(run)
        return name if run.label else f"{name} {run.config.summary_for(run.backend)}"

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
            self._show_status(str(exc))
            return
        model = self.history.model
        while any(model.row_of(i) is None for i in ids) and model.canFetchMore():
            model.fetchMore()  # an older group may lie past the loaded pages
        self.history.select_runs(ids)
        self._on_selection(self.history.selected_ids())  # now, not after the burst timer
        if ids:
            self.compare.pin_baseline(ids[0])
        self.tabs.setCurrentWidget(self.compare)
        self._show_status(f"Comparing group #{group_id}: {len(ids)} runs")

    def _on_load_requested(self, run_id: int) -> None:
        runs = self._runs_for([run_id])
        if runs:
            run = runs[0]
            self.controls.load_run(run.problem, run.config, run.seq_lens, run.backend, run.label)
            self._show_status(f"Loaded the settings of run #{run_id} into the form")

    @Slot(list)
    def _on_relabelled(self, ids: list[int]) -> None:
        self._on_selection(self.history.selected_ids())
        self.ladder.refresh()

    @Slot(list)
    def _on_runs_deleted(self, ids: list[int]) -> None:
        self._on_selection(self.history.selected_ids())
        self.ladder.refresh_groups()  # a group's run count, or a step gone from its ladder

    # ---- export ---------------------------------------------------------------------------------
    def _on_export_csv(self) -> None:
        self.history.export_selected()

    def export_ladder_csv(self, group_id: int) -> Path | None:
        """Every point of ladder ``group_id``'s runs to a CSV file the user picks."""
        if self.store is None:
            return None
        try:
            run_ids = [r.id for r in self.store.group_runs(group_id)]
        except (StoreError, OSError) as exc:
            self._warn("Export", str(exc))
            return None
        if not run_ids:  # export_csv would export every run for an empty list
            self._show_status(f"Ladder #{group_id} has no runs to export")
            return None
        start = Path(self.history.export_dir or Path.home()) / f"fmha-ladder-{group_id}.csv"
        target = ask_csv_path(self, f"Export ladder #{group_id} to CSV", start)
        if target is None:
            return None
        try:
            rows = self.store.export_csv(target, run_ids)
        except (StoreError, OSError) as exc:
            self._warn("Export", f"Could not write {target}:\n{exc}")
            return None
        self.history.export_dir = str(target.parent)
        self._show_status(
            f"Exported {rows} point{'s' if rows != 1 else ''} of ladder #{group_id} to {target}"
        )
        return target

    def export_plots_png(self) -> Path | None:
        start = str(Path(self.history.export_dir or Path.home()) / "fmha-plots.png")
        path, _ = QFileDialog.getSaveFileName(
            self, "Export plots as PNG", start, "PNG images (*.png)"
        )
        if not path:
            return None
        chosen = Path(path)
        target = chosen if chosen.suffix.lower() == ".png" else chosen.with_suffix(".png")
        if not may_replace(self, chosen, target):
            return None
        protected = [self.store.path] if self.store is not None else []
        try:
            target = self.plots.export_png(target, protected=protected)
        except Exception as exc:
            self._warn("Export", f"Could not write {path}:\n{exc}")
            return None
        self.history.export_dir = str(target.parent)
        self._show_status(f"Saved the plots to {target}")
        return target

    # ---- messages -------------------------------------------------------------------------------
    def _show_status(self, text: str) -> None:
        self.statusBar().showMessage(text, 8000)

    def _warn(self, title: str, text: str) -> None:
        QMessageBox.warning(self, title, text)

    def _error(self, title: str, text: str) -> None:
        QMessageBox.critical(self, title, text)

    def _on_about(self) -> None:
        QMessageBox.about(
            self,
            "About FMHA Workbench",
            "FMHA Workbench: sweep a FlashAttention kernel's knobs, see latency, throughput and "
            "the blocks it computed, keep every run and compare them.",
        )

    # ---- settings -------------------------------------------------------------------------------
    def _saved_db_path(self) -> Path | None:
        value = self.settings.value("db_path", "")
        return Path(str(value)) if value else None

    def _restore_settings(self) -> None:
        s = self.settings
        geometry = s.value("window/geometry")
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
            # Saved on a larger monitor: shrink it onto this one rather than off its edges.
            screen = self.screen() or QGuiApplication.primaryScreen()
            if screen is not None:
                room = screen.availableGeometry()
                if self.width() > room.width() or self.height() > room.height():
                    self.fit_to_screen()
        for key, splitter in self._remembered_splitters():
            state = s.value(key)
            restored = isinstance(state, QByteArray) and not state.isEmpty()
            if restored and splitter.restoreState(state) and splitter is self.compare.split:
                self.compare.keep_split()  # as the user left it, not fitted to the rows
        shares = s.value("window/tab_shares", "")
        with contextlib.suppress(TypeError, ValueError):
            for index, share in json.loads(str(shares or "{}")).items():
                if 0.05 <= float(share) <= 0.95:
                    self._tab_shares[int(index)] = float(share)
        raw = s.value("controls", "")
        if raw:
            try:
                state = json.loads(str(raw))
            except ValueError:
                state = None  # a hand-edited or foreign settings file: keep the defaults
            if isinstance(state, dict):
                self.controls.apply_state(state)
        self.history.export_dir = str(s.value("export_dir", "") or "")
        tab = s.value("window/tab", 0)
        with contextlib.suppress(TypeError, ValueError):
            self.tabs.setCurrentIndex(int(tab))  # type: ignore[arg-type]
        self._apply_tab_share(self.tabs.currentIndex())

    def _remembered_splitters(self) -> list[tuple[str, QSplitter]]:
        """Every splitter whose sizes the window keeps between sessions (the Ladder tab's
        table splitter fits its steps itself)."""
        return [
            ("window/main_split", self.main_split),
            ("window/compare_split", self.compare.split),
            ("window/ladder_bottom_split", self.ladder.bottom_split),
        ]

    def save_settings(self) -> None:
        s = self.settings
        s.setValue("settings_version", SETTINGS_VERSION)
        s.setValue("window/geometry", self.saveGeometry())
        for key, splitter in self._remembered_splitters():
            s.setValue(key, splitter.saveState())
        self._on_tab_changed(self.tabs.currentIndex())  # the shown tab's share as dragged
        s.setValue("window/tab_shares", json.dumps(self._tab_shares))
        s.setValue("window/tab", self.tabs.currentIndex())
        s.setValue("controls", json.dumps(self.controls.state()))
        s.setValue("export_dir", self.history.export_dir)
        if self.store is not None:
            s.setValue("db_path", str(self.store.path))
        s.sync()

    # ---- closing --------------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:
        if self.is_running():
            model = self.progress_model
            what = model.story.noun if model is not None else "job"
            self._quit_question = f"A {what} is running"
            try:
                answer = QMessageBox.question(
                    self,
                    self._quit_question,
                    f"Stop the {what} now and quit? The points finished so far "
                    "are kept and the run is stored as cancelled.",
                    QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                    QMessageBox.StandardButton.No,
                )
            finally:
                self._quit_question = None
            if answer != QMessageBox.StandardButton.Yes:
                event.ignore()
                return
        self.shutdown()
        event.accept()

    def shutdown(self) -> None:
        """Stop background work, save settings and close the store (idempotent)."""
        if self._worker is not None:
            self._worker.request_cancel()
            # The window is going away: nothing the worker still says should reach it (a
            # dialog after close, a read on a closed store). The job itself stores its open
            # runs as cancelled.
            self._worker.blockSignals(True)
            # The current point may take a while (a long compile): let the window go now.
            self.hide()
        if self._probe is not None:
            self._probe.blockSignals(True)
        for thread in (self._thread, self._probe_thread):
            if thread is not None:
                # Returns once the current point (or the probe) is done; cancel was requested.
                thread.quit()
                thread.wait()
        self._thread = None
        self._worker = None
        self._probe_thread = None
        self._probe = None
        self.save_settings()
        if self.store is not None:
            self.store.close()
            self.store = None
            # Nothing may read the closed connection later (a late scroll, a queued refresh).
            self.history.set_store(None)
            self.ladder.set_store(None)
