"""File › Add kernel…: load a plugin file into the running window.

The file is imported and its declarations checked in a child process of its own, off the GUI
thread (:func:`workbench.backends.plugin_reload.check_file`), so a plugin whose import crashes or
hangs never takes the window down; once accepted it is taken into the catalog, the backends are
probed again and the new backend is ticked in the picker. A refusal (the file and the field, or
the line of the file where its import failed) is shown in one line and changes nothing. The
same loader reloads a watched file when it is saved (:mod:`workbench.gui.plugin_watch`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMenu

from workbench.gui.plugin_watch import PluginWatch

DIALOG_TITLE = "Add kernel"
PLUGIN_FILTER = "Python plugin files (*.py);;All files (*)"


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class _CheckWorker(QObject):
    """Imports one plugin file in a checking child (in its own QThread) and says what came."""

    checked = Signal(object)  # the PluginVersion accepted
    refused = Signal(str)  # why not, in one line
    done = Signal()

    def __init__(self, path: str) -> None:
        super().__init__()
        from workbench.backends.plugin_reload import checking_engine

        self.path = path
        self.engine = checking_engine()  # killed from the GUI thread when the window closes

    @Slot()
    def run(self) -> None:
        from workbench.backends.plugin_reload import check_file
        from workbench.errors import BackendError

        try:
            self.checked.emit(check_file(self.path, self.engine))
        except BackendError as exc:
            self.refused.emit(one_line(exc))
        except Exception as exc:  # the loader's own failure must not leave the window waiting
            self.refused.emit(f"{self.path}: {type(exc).__name__}: {one_line(exc)}")
        finally:
            self.done.emit()


class PluginLoader(QObject):
    """Checks and takes plugin files one at a time; ``loaded``/``refused`` say how each went,
    with whether it was a reload of a watched file."""

    loaded = Signal(object, bool)  # PluginVersion, reload
    refused = Signal(str, bool)  # the one line, reload

    def __init__(self, parent: QObject) -> None:
        super().__init__(parent)
        self._thread: QThread | None = None
        self._worker: _CheckWorker | None = None
        self._reload = False
        self._waiting: list[tuple[str, bool]] = []

    def busy(self) -> bool:
        return self._worker is not None

    def load(self, path: str, *, reload: bool = False) -> None:
        """Check and take ``path``; after the one being checked, if any."""
        if self.busy():
            self._waiting.append((path, reload))
            return
        self._reload = reload
        worker = _CheckWorker(path)
        worker.checked.connect(self._on_checked)
        worker.refused.connect(self._on_refused)
        worker.done.connect(self._on_done)
        thread = QThread(self)
        worker.moveToThread(thread)
        thread.started.connect(worker.run)
        worker.done.connect(thread.quit, Qt.ConnectionType.DirectConnection)
        self._worker, self._thread = worker, thread
        thread.start()

    @Slot(object)
    def _on_checked(self, version: Any) -> None:
        from workbench.backends.plugin_reload import take
        from workbench.errors import BackendError

        try:
            take(version)  # this process's import, of the file the child imported
        except BackendError as exc:
            self.refused.emit(one_line(exc), self._reload)
            return
        self.loaded.emit(version, self._reload)

    @Slot(str)
    def _on_refused(self, line: str) -> None:
        self.refused.emit(line, self._reload)

    @Slot()
    def _on_done(self) -> None:
        if self._thread is not None:
            self._thread.wait()
            self._thread.deleteLater()
        self._thread = self._worker = None
        if self._waiting:
            path, reload = self._waiting.pop(0)
            self.load(path, reload=reload)

    def stop(self) -> None:
        """The window is closing: end a check under way and wait for its thread."""
        self._waiting.clear()
        if self._worker is not None:
            self._worker.blockSignals(True)
            self._worker.engine.kill()  # a hung import must not hold the window open
        if self._thread is not None:
            self._thread.quit()  # its done signal, which quits it, is blocked now
            self._thread.wait()
        self._thread = self._worker = None


class PluginMenu(QObject):
    """The File menu's "Add kernel…" for ``window`` (the main window), and the plugin files it
    loaded, watched for saves."""

    def __init__(self, window: Any, menu: QMenu) -> None:
        super().__init__(window)
        self.window = window
        self.loader = PluginLoader(self)
        self.loader.loaded.connect(self._on_loaded)
        self.loader.refused.connect(self._on_refused)
        self.watch = PluginWatch(window, self.loader)
        self.action = QAction("Add &kernel…", window)
        self.action.setStatusTip("Load a plugin file (.py) that declares a backend")
        self.action.triggered.connect(self.choose)
        menu.addAction(self.action)
        self._watch_command_line_plugins()

    def _watch_command_line_plugins(self) -> None:
        """``fmha-workbench --plugin FILE gui``: FILE is watched as if added from the menu."""
        from workbench.backends.plugin_reload import pin_loaded_files
        from workbench.errors import BackendError

        try:
            paths = pin_loaded_files()
        except BackendError as exc:  # the command line checked them; a file changed since
            self.window.show_status(one_line(exc))
            return
        for path in paths:
            self.watch.watch(path)

    @Slot()
    def choose(self) -> None:
        """Pick a plugin file and load it."""
        start = str(Path.cwd())
        path, _ = QFileDialog.getOpenFileName(self.window, DIALOG_TITLE, start, PLUGIN_FILTER)
        if path:
            self.add(path)

    def add(self, path: str) -> None:
        self.window.show_status(f"Loading the plugin {path}…")
        self.loader.load(path)

    @Slot(object, bool)
    def _on_loaded(self, version: Any, reload: bool) -> None:
        self.window.start_backend_probe()  # the picker lists what the catalog now has
        if reload:
            self.watch.reloaded(version)
            return
        if version.names:
            self.window.controls.backends.set_checked([version.names[0]])
        self.watch.watch(version.path)
        names = ", ".join(version.names)
        self.window.show_status(f"Added {names} from {version.path}; watching it for edits")

    @Slot(str, bool)
    def _on_refused(self, line: str, reload: bool) -> None:
        if reload:
            self.watch.refused(line)
            return
        self.window.show_status(line)
        self.window.warn(DIALOG_TITLE, f"The plugin was not loaded:\n\n{line}")

    def stop(self) -> None:
        self.watch.stop()
        self.loader.stop()
