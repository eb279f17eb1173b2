"""History's Export CSV… (File › Export CSV…) as a job: the rows are read and written in a
worker thread, with a progress dialog whose Cancel stops it, so the window never freezes on
20,000 runs; a FIFO, a device or a socket is refused before anything is opened (a FIFO with no
reader would block the writer for ever)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot
from PySide6.QtWidgets import QProgressDialog

PROGRESS_EVERY_S = 0.1  # the dialog's bar moves this often at most (a signal per run is a flood)


class CsvExportWorker(QObject):
    """Reads the runs ``run_ids`` (None: all) of the database at ``db_path`` through its own
    read-only connection and writes their rows to ``target``."""

    progressed = Signal(int, int)  # runs read, runs in all
    finished = Signal(object)  # the number of rows written; None when cancelled
    failed = Signal(str)
    done = Signal()  # last, whatever happened: the thread quits on it

    def __init__(self, db_path: Path, target: Path, run_ids: list[int] | None) -> None:
        super().__init__()
        self.db_path, self.target, self.run_ids = db_path, target, run_ids
        self._cancel = threading.Event()

    def request_cancel(self) -> None:
        self._cancel.set()

    @Slot()
    def run(self) -> None:
        try:
            self._export()
        except Exception as exc:  # every failure is the user's to read, in one line
            self.failed.emit(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        finally:
            self.done.emit()

    def _export(self) -> None:
        from workbench.safe_write import UnsafeTarget, write_bytes_safely
        from workbench.store import Store, StoreError, csv_text

        with Store(self.db_path, read_only=True) as store:
            total = len(self.run_ids) if self.run_ids else store.count_runs()
            rows: list[dict[str, Any]] = []
            seen: set[int] = set()
            shown = time.monotonic()
            for row in store.export_rows(self.run_ids):
                if self._cancel.is_set():
                    self.finished.emit(None)
                    return
                rows.append(row)
                seen.add(row["run_id"])
                if time.monotonic() - shown >= PROGRESS_EVERY_S:
                    shown = time.monotonic()
                    self.progressed.emit(len(seen), total)
        if self._cancel.is_set():
            self.finished.emit(None)
            return
        try:
            write_bytes_safely(self.target, csv_text(rows).encode(), protected=[self.db_path])
        except UnsafeTarget as exc:
            raise StoreError(f"cannot export: {exc}") from exc
        except OSError as exc:
            raise StoreError(f"cannot write {self.target}: {exc.strerror or exc}") from exc
        self.finished.emit(len(rows))


def not_a_regular_file(target: Path) -> str | None:
    """Why ``target`` cannot take an export from the window, or None: an existing FIFO, device
    or socket (the command line writes those for a reader waiting there; a window has none)."""
    if target.exists() and not target.is_file():
        return (
            f"cannot export to {target}: it is not a regular file (a FIFO, a device or a "
            "socket); choose a file"
        )
    return None


class CsvExportJob(QObject):
    """One export at a time for ``history`` (the History panel: its store, messages and
    export folder), shown in a progress dialog with Cancel."""

    def __init__(self, history: Any) -> None:
        super().__init__(history)
        self.history = history
        self.dialog: QProgressDialog | None = None
        self._worker: CsvExportWorker | None = None
        self._thread: QThread | None = None
        self._what = ""

    def is_running(self) -> bool:
        return self._worker is not None

    def start(self, target: Path, run_ids: list[int], what: str) -> bool:
        """Export ``run_ids`` (empty: all runs; ``what`` names them) to ``target``; False
        (said) when it cannot start."""
        store = self.history.store
        if self.is_running() or store is None:
            self.history.message.emit("An export is already running" if store else "No database")
            return False
        problem = not_a_regular_file(target)
        if problem:
            self.history._on_store_failed(problem)
            return False
        self._what = what
        worker = CsvExportWorker(store.path, target, run_ids or None)
        worker.progressed.connect(self._on_progress)
        worker.finished.connect(self._on_finished)
        worker.failed.connect(self._on_failed)
        worker.done.connect(self._on_done)
        dialog = QProgressDialog(f"Exporting {what} to {target}…", "Cancel", 0, 0, self.history)
        dialog.setObjectName("csv_export_progress")
        dialog.setWindowTitle("Export CSV")
        dialog.setWindowModality(Qt.WindowModality.NonModal)  # the window stays usable
        dialog.setMinimumDuration(0)
        # To this GUI-thread slot: a slot of the worker would wait in its busy thread's queue.
        dialog.canceled.connect(self.cancel)
        self.dialog, self._worker = dialog, worker
        thread = QThread(self)
        worker.moveToThread(thread)
        thread.started.connect(worker.run)
        worker.done.connect(thread.quit, Qt.ConnectionType.DirectConnection)
        self._thread = thread
        thread.start()
        dialog.show()
        return True

    @Slot()
    def cancel(self) -> None:
        if self._worker is not None:
            self._worker.request_cancel()

    @Slot(int, int)
    def _on_progress(self, done: int, total: int) -> None:
        if self.dialog is not None:
            self.dialog.setMaximum(max(total, 1))
            self.dialog.setValue(min(done, total))

    @Slot(object)
    def _on_finished(self, rows: int | None) -> None:
        worker = self._worker
        if worker is None:
            return
        if rows is None:
            self.history.message.emit(f"Export cancelled: nothing was written to {worker.target}")
            return
        self.history.last_export = worker.target
        self.history.message.emit(
            f"Exported {rows} point{'s' if rows != 1 else ''} of {self._what} to {worker.target}"
        )

    @Slot(str)
    def _on_failed(self, text: str) -> None:
        self.history._on_store_failed(text)

    @Slot()
    def _on_done(self) -> None:
        if self._thread is not None:
            self._thread.wait()
            self._thread.deleteLater()
        if self.dialog is not None:
            self.dialog.canceled.disconnect()
            self.dialog.close()
            self.dialog.deleteLater()
        self._thread, self._worker, self.dialog = None, None, None

    def stop(self) -> None:
        """The window is going away: cancel and wait (reading stops at the next row)."""
        if self._worker is not None:
            self._worker.request_cancel()
            self._worker.blockSignals(True)
        if self._thread is not None:
            self._thread.quit()
            self._thread.wait()
        self._thread, self._worker = None, None
