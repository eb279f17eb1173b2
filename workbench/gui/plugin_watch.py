"""Edit and rerun: the window watches the plugin files it loaded, and on each save reloads the
file, reruns the last sweep (or group) on it with the same settings and shows the new curve
beside the previous run's.

Editors save by writing a new file and renaming it over the old one, which drops the path from
a QFileSystemWatcher: the path is added again after each change, and its folder is watched too
so a file that reappears is seen. A save comes as several changes, so they settle for
:data:`SETTLE_MS` first; a save while a job runs waits for it to end. A save that fails to
import, or whose declaration is refused, shows its one line (the file, the line in it, the
error) in the status bar and leaves the previous version loaded.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Slot

SETTLE_MS = 300  # a save's bursts of change notices settle within this
BUSY_RETRY_MS = 500  # how often a save waiting for a running job looks again


def file_digest(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


class PluginWatch(QObject):
    """Watches ``window``'s plugin files and reloads them through ``loader``
    (:class:`workbench.gui.plugin_menu.PluginLoader`)."""

    def __init__(self, window: Any, loader: Any) -> None:
        super().__init__(window)
        self.window = window
        self.loader = loader
        self.paths: list[str] = []
        self.last_error = ""  # the last refused save's line ("" once a save loads)
        self._changed: set[str] = set()
        self._rerun_beside: list[int] | None = None  # the runs a rerun's new ones join
        self._watcher = QFileSystemWatcher(self)
        self._watcher.fileChanged.connect(self._on_file_changed)
        self._watcher.directoryChanged.connect(self._on_folder_changed)
        self._settle = QTimer(self)
        self._settle.setSingleShot(True)
        self._settle.timeout.connect(self._on_settled)
        window.jobs.ended.connect(self._on_job_ended)

    def watch(self, path: str) -> None:
        if path not in self.paths:
            self.paths.append(path)
        self._rewatch(path)
        folder = str(Path(path).parent)
        if folder not in self._watcher.directories():
            self._watcher.addPath(folder)

    def _rewatch(self, path: str) -> None:
        if path not in self._watcher.files() and Path(path).is_file():
            self._watcher.addPath(path)

    @Slot(str)
    def _on_file_changed(self, path: str) -> None:
        self._rewatch(path)  # a rename over it dropped it from the watcher
        self._changed.add(path)
        self._settle.start(SETTLE_MS)

    @Slot(str)
    def _on_folder_changed(self, folder: str) -> None:
        for path in self.paths:
            if str(Path(path).parent) == folder and path not in self._watcher.files():
                self._on_file_changed(path)

    @Slot()
    def _on_settled(self) -> None:
        from workbench.backends.plugin_reload import loaded_version

        if self.window.jobs.is_running() or self.loader.busy():
            self._settle.start(BUSY_RETRY_MS)  # after the job: its engine is in use
            return
        changed, self._changed = sorted(self._changed), set()
        for path in changed:
            digest = file_digest(path)
            if digest is None or digest == loaded_version(path):
                continue  # gone for now (the folder notice brings it back) or unchanged
            self.window.show_status(f"{Path(path).name} changed: reloading it…")
            self.loader.load(path, reload=True)

    def reloaded(self, version: Any) -> None:
        """A save loaded: rerun the last job where it ran this plugin's backends."""
        self.last_error = ""
        jobs = self.window.jobs
        job = jobs.last_job
        name = Path(version.path).name
        if job is None or not set(job.backends) & set(version.names):
            self.window.show_status(f"Reloaded {name}; run a sweep on it to see the new version")
            return
        self.window.controls.refresh_declared()  # a knob left at its default takes the new one
        model = jobs.progress_model
        previous = list(model.run_ids) if model is not None else []
        if jobs.start_job(job):
            self._rerun_beside = previous
            self.window.show_status(f"Reloaded {name}: rerunning the last {job.kind}…")

    def refused(self, line: str) -> None:
        """A save did not load: its line stays in the status bar until the next message."""
        self.last_error = line
        kept = "the previous version stays loaded"
        self.window.statusBar().showMessage(f"{self.last_error} ({kept})")

    @Slot()
    def _on_job_ended(self) -> None:
        previous, self._rerun_beside = self._rerun_beside, None
        model = self.window.jobs.progress_model
        if previous is None or model is None:
            return
        history = self.window.history
        history.refresh(keep_selection=False)
        history.select_runs(previous + [r for r in model.run_ids if r not in previous])

    def stop(self) -> None:
        self._settle.stop()
        for watched in self._watcher.files() + self._watcher.directories():
            self._watcher.removePath(watched)
