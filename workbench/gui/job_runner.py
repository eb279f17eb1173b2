"""The window's running job: built from the form by the core, run by a worker thread, followed
through its events, cancelled or ended.

One :class:`JobRunner` per window. It starts one SweepWorker per job (the core's jobs, in
:mod:`workbench.jobs`; the job opens its own Store on the same file), feeds the core's progress
model (:mod:`workbench.run.progress`) from the job's events and renders it in the status bar, and
asks the job's story (:mod:`workbench.run.stories`) what the window selects and follows as the job
starts and ends. Every worker signal lands on a bound method of this QObject, which lives in the
GUI thread (docs/design.md trap: never a lambda).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot
from PySide6.QtWidgets import QLabel, QMessageBox, QProgressBar, QWidget

from workbench.config import ConfigError
from workbench.gui.window_protocols import JobWindow
from workbench.gui.worker import SweepWorker, start_in_thread
from workbench.run import events as ev
from workbench.run.progress import ProgressModel

PROGRESS_TICK_MS = 1000  # how often the time left is counted down during a point


class JobRunner(QObject):
    """Runs the form's job for ``window`` (the main window: its form, views, actions and
    messages). ``timing`` overrides the backends' timing (tests use tiny settings)."""

    ended = Signal()  # a job's worker is done and the window shows how it ended

    def __init__(self, window: JobWindow, timing: Any = None) -> None:
        super().__init__(cast(QObject, window))  # the main window, a QWidget
        self.window = window
        self.timing = timing
        # None: a child process for backends that compute in process (workbench.jobs.background
        # decides); tests that patch a backend in this process set False.
        self.sweep_in_child: bool | None = None
        # The running (or last) job's progress, fed by its events.
        self.progress_model: ProgressModel | None = None
        self.last_run_id: int | None = None
        self.last_job: Any = None  # what an edited plugin reruns (workbench.gui.plugin_watch)
        self._worker: SweepWorker | None = None
        self._thread: QThread | None = None
        self._quit_question: str | None = None  # the title of the open "quit now?" question

        self.progress_label = QLabel()
        self.progress_label.setObjectName("progress_label")
        self.progress = QProgressBar()
        self.progress.setObjectName("progress")
        self.progress.setMaximumWidth(220)
        self.progress.setFormat("%v / %m points")
        self.progress.hide()
        self.progress_label.hide()
        # The time left counts down between a job's events (a long point said the same for
        # minutes).
        self._progress_timer = QTimer(self)
        self._progress_timer.setInterval(PROGRESS_TICK_MS)
        self._progress_timer.timeout.connect(self._tick_progress)

    def is_running(self) -> bool:
        return self._worker is not None

    # ---- starting ------------------------------------------------------------------------------
    @Slot()
    def start_run(self) -> None:
        """Run what the form describes: a sweep on one ticked backend, a group on several."""
        job = self._form_job("Run", self.window.controls.job)
        if job is not None:
            self._start_worker(job)

    @Slot()
    def start_ladder(self) -> None:
        """Run the built-in ladder on the form's problem, lengths and backend (the Ladder tab)."""
        job = self._form_job("Ladder", self._ladder_job)
        if job is not None:
            self.window.tabs.setCurrentWidget(self.window.ladder)
            self._start_worker(job)

    def start_job(self, job: Any) -> bool:
        """Start ``job`` again as it was built (an edited plugin reruns the last one); False
        when it cannot start now (a job runs, no writable database)."""
        checked = self._form_job("Run", lambda: job)
        if checked is not None:
            self._start_worker(checked)
        return checked is not None

    def _ladder_job(self) -> Any:
        from workbench.jobs import ladder_job  # the core, only once a ladder is asked for
        from workbench.jobs.ladder_steps import LADDER_PRESETS, load_ladder

        # The ladder's own label, not the form's: that one names a sweep, left from the last.
        label = self.window.ladder.label_edit.text().strip()
        choice = self.window.ladder.preset.currentData()  # a built-in's name, a file, or None
        ladder = (
            load_ladder(preset=choice)
            if choice in LADDER_PRESETS
            else load_ladder(choice)
            if choice
            else None  # None: this GPU's
        )
        controls = self.window.controls
        return ladder_job(controls.spec(), controls.backends.checked(), label, ladder)

    def _form_job(self, title: str, build: Callable[[], Any]) -> Any:
        """The job the form describes, built by the core through ``build``, or None after
        telling the user why nothing can run (a bad value is marked on its field)."""
        if self.is_running():
            return None
        self.window.controls.clear_errors()
        if self.window.store is None:
            self.window.warn(title, "No writable run database is open (File › Open database…).")
            return None
        if not self.window.database.ensure_writable(f"run the {title.lower()}"):
            self.window.warn(title, self.window.store.notice or "The database is read-only.")
            return None
        try:
            return build()
        except ConfigError as exc:
            self._mark(exc)
            return None

    def _mark(self, exc: ConfigError) -> None:
        self.window.show_status(self.window.controls.mark_error(exc.field, str(exc)))

    def _start_worker(self, job: Any) -> None:
        store = self.window.store
        assert store is not None
        self.progress_model = ProgressModel.for_job(job)
        self.last_job = job
        worker = SweepWorker(job, store.path, self.timing, in_child=self.sweep_in_child)
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

    # ---- progress ------------------------------------------------------------------------------
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
        w = self.window
        w.controls.set_running(running)
        w.ladder.set_running(running)
        w.run_action.setEnabled(not running)
        w.run_ladder_action.setEnabled(not running)
        w.cancel_action.setEnabled(running)

    @Slot()
    def cancel(self) -> None:
        if self._worker is not None and not self._worker.cancel_requested:
            self._worker.request_cancel()
            if self.progress_model is not None:
                self.progress_model.cancelling()
                self._render_progress()
            self.window.controls.cancel_button.setEnabled(False)
            self.window.ladder.cancel_button.setEnabled(False)

    @Slot(object)
    def _on_event(self, event: Any) -> None:
        """One event of the running job: the progress model takes it, the views follow."""
        model = self.progress_model
        if model is None:
            return
        note = model.update(event)
        self._render_progress()
        if note:
            self.window.show_status(note)
        story, history, ladder = model.story, self.window.history, self.window.ladder
        if isinstance(event, ev.JobStarted):
            if story.selects_its_runs:
                history.refresh(keep_selection=False)
                history.select_runs(list(event.run_ids))
            if story.follows_its_group:
                ladder.set_live_group(event.group_id)
        elif isinstance(event, ev.RunStarted):
            self.last_run_id = event.run_id
            if not story.selects_its_runs:  # else its runs were selected when it started
                history.refresh(keep_selection=False)
                history.select_runs([event.run_id])
            self._refresh_live_ladder()
        elif isinstance(event, ev.PointFinished):
            self.window.refresh_run_views(event.run_id)
            self._refresh_live_ladder()
        elif isinstance(event, ev.RunFinished):
            history.refresh_run(event.run_id)
            self.window.refresh_run_views(event.run_id)
            self._refresh_live_ladder()

    def _refresh_live_ladder(self) -> None:
        model = self.progress_model
        live = model is not None and model.story.follows_its_group and model.group_id is not None
        if model is not None and live and self.window.ladder.group_id() == model.group_id:
            self.window.ladder.refresh()

    @Slot(object)
    def _on_rejected(self, exc: ConfigError) -> None:
        model = self.progress_model
        text = model.story.refusal(exc) if model is not None else None
        if model is not None and text is not None:
            self.window.warn(model.story.title, text)
            self.window.show_status(str(exc))
        else:
            self._mark(exc)

    @Slot(str)
    def _on_crashed(self, message: str) -> None:
        model = self.progress_model
        job = model.story.noun if model is not None else "job"
        self.window.error(f"{job.capitalize()} stopped", f"The {job} could not run:\n\n{message}")
        self.window.show_status(message.splitlines()[0] if message else f"The {job} stopped")
        for run_id in model.run_ids if model is not None else ():  # every job names its runs
            self.window.history.refresh_run(run_id)

    # ---- the end -------------------------------------------------------------------------------
    @Slot()
    def _on_worker_done(self) -> None:
        try:
            self._show_ending()
        finally:
            self.ended.emit()

    def _show_ending(self) -> None:
        if self._thread is not None:
            # done is emitted as run() returns and has already quit the thread: a short wait.
            self._thread.wait()
            self._thread.deleteLater()
        cancelled = self._worker is not None and self._worker.cancel_requested
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
        story, w = outcome.story, self.window
        if story.follows_its_group:
            w.ladder.set_live_group(None)
            w.ladder.show_group(cast(int, model.group_id))  # a ladder started its group
        if story.selects_its_runs:
            w.history.refresh(keep_selection=False)
            w.history.select_runs(list(model.run_ids))
        w.show_status(outcome.line)
        if outcome.failures:
            w.error(
                story.failure_title,
                f"{outcome.line}; {story.failure_kept}.\n\n" + "\n".join(outcome.failures),
            )

    def may_quit(self) -> bool:
        """Ask whether to stop the running job and quit (True when nothing runs)."""
        if not self.is_running():
            return True
        model = self.progress_model
        what = model.story.noun if model is not None else "job"
        self._quit_question = f"A {what} is running"
        try:
            answer = QMessageBox.question(
                cast(QWidget, self.window),
                self._quit_question,
                f"Stop the {what} now and quit? The points finished so far "
                "are kept and the run is stored as cancelled.",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                QMessageBox.StandardButton.No,
            )
        finally:
            self._quit_question = None
        return answer == QMessageBox.StandardButton.Yes

    def _close_quit_question(self) -> None:
        """The job ended while "Stop the sweep now and quit?" was up: the question is moot, so
        answer it No (the window stays, and says how the job ended)."""
        if self._quit_question is None:
            return
        for box in cast(QWidget, self.window).findChildren(QMessageBox):
            if box.isVisible() and box.windowTitle() == self._quit_question:
                button = box.button(QMessageBox.StandardButton.No)
                if button is not None:
                    button.click()
                else:
                    box.reject()

    def stop(self) -> None:
        """The window is going away: cancel the job and wait for its thread (its runs are
        stored cancelled); nothing the worker still says reaches the window."""
        if self._worker is not None:
            self._worker.request_cancel()
            self._worker.blockSignals(True)
            # The current point may take a while (a long compile): let the window go now.
            self.window.hide()
        if self._thread is not None:
            self._thread.quit()
            self._thread.wait()
        self._thread = None
        self._worker = None
        self._progress_timer.stop()
