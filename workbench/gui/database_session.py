"""The window's run database: which file is open, opening another (File › Open database…),
importing runs from one (File › Import runs…) and reading block maps from it.

A damaged, locked or foreign file never crashes the window: it is refused with a dialog (or, while
the window is still being built, a notice shown once it is up) and the window carries on with no
database or the one it had.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from workbench.gui.lock_wait import install_lock_waits, wait_off_thread
from workbench.store import (
    SCHEMA_VERSION,
    Store,
    StoreError,
    data_dir_db_path,
    default_db_path,
)
from workbench.store.files import read_only_place, real_db_path

# This store writes from the GUI thread (relabel, delete): a short busy timeout, since the
# store's retries with backoff already wait out a writer's brief commit.
GUI_BUSY_TIMEOUT_S = 0.25
DB_FILTER = "Run databases (*.db);;All files (*)"


class DatabaseSession:
    """The open :class:`Store` (None: none open) of ``window``, which is told of every change
    through ``on_changed(store, path)`` and of runs imported through ``on_imported(result)``;
    ``busy()`` says whether a job is running (no switch
    then); ``status`` and ``warn`` are the window's status line and warning dialog."""

    def __init__(
        self,
        window: QWidget,
        *,
        on_changed: Callable[[Store | None, Path], None],
        on_imported: Callable[[Any], None],
        busy: Callable[[], bool],
        status: Callable[[str], None],
        warn: Callable[[str, str], None],
    ) -> None:
        self.window = window
        self.store: Store | None = None
        self._on_changed = on_changed
        self._on_imported = on_imported
        self._busy = busy
        self._status = status
        self._warn = warn
        self._pending_notice: str | None = None

    def open(self, path: str | Path, *, show_errors: bool = True) -> bool:
        """Switch to the database at ``path``; False (and the reason shown) when it cannot be."""
        if self._busy():
            self._warn(
                "Database", "Wait for the running sweep to finish before switching databases."
            )
            return False
        path = Path(path).expanduser()
        if not path.parent.exists() and path != data_dir_db_path() and not self._may_create(path):
            self._status(f"No database opened: {path.parent} does not exist")
            if self.store is None:
                self._on_changed(None, path)
            return False
        try:
            store = self._open_store(path)
        except (StoreError, OSError) as exc:
            message = f"Cannot open the run database {path}:\n{exc}"
            if show_errors:
                self._warn("Database", message)
            else:
                self._notice_later(message)  # the window is still being built
            self._status(str(exc))
            if self.store is None:
                self._on_changed(None, path)
            return False
        old, self.store = self.store, store
        if old is not None:
            old.close()
        self._on_changed(store, store.path)
        if store.upgrade_from is not None:
            self._status(store.notice or "")  # nothing is wrong: said, not asked about
        elif store.notice:
            self._notice_later(store.notice)
        return True

    def _open_store(self, path: Path) -> Store:
        """The window's store on ``path``, opened off the GUI thread once the window is up
        (another writer's lock is waited out with the window answering; while it is being
        built, in place: a nested event loop then would run what waits for the built window);
        in a read-only place (media, folder or file) opened read-only, its notice saying so:
        SQLite would fail on the first write, or to open."""
        place = read_only_place(real_db_path(path))
        waiting_for = f"another program to release its lock on {path}"
        if place is None:

            def open_store() -> Store:
                # Opening never rewrites a file: an older schema is upgraded when written to.
                return Store(path, busy_timeout_s=GUI_BUSY_TIMEOUT_S, upgrade=False)

            if self.window.isVisible():
                store = wait_off_thread(self._status, waiting_for, open_store)
            else:
                store = open_store()
            install_lock_waits(store, self._status)
            return store
        store = Store(path, busy_timeout_s=GUI_BUSY_TIMEOUT_S, read_only=True)
        store.notice = (
            f"{store.path} is open read-only: {place}. Running, importing, relabelling and "
            "deleting are off."
        )
        return store

    def ensure_writable(self, why: str) -> bool:
        """Before a write (``why``: "run the sweep"): upgrade an older schema opened as it is,
        saying so; False (said) when the database cannot be upgraded."""
        store = self.store
        if store is None or store.upgrade_from is None:
            return store is not None and not store.read_only
        try:
            upgraded = wait_off_thread(
                self._status,
                f"another program to release its lock on {store.path}",
                lambda: Store(store.path, busy_timeout_s=GUI_BUSY_TIMEOUT_S),
            )
            install_lock_waits(upgraded, self._status)
        except (StoreError, OSError) as exc:
            self._warn("Database", f"Cannot upgrade {store.path} to {why}:\n{exc}")
            return False
        store.close()
        self.store = upgraded
        self._on_changed(upgraded, upgraded.path)
        self._status(
            f"Upgraded {upgraded.path} from schema {store.upgrade_from} to "
            f"{SCHEMA_VERSION} to {why}"
        )
        return not upgraded.read_only

    def upgrade(self) -> None:
        """File › Upgrade database: upgrade an older schema now."""
        if self._busy():
            return
        if self.store is None or self.store.upgrade_from is None:
            self._status("The open database needs no upgrade")
            return
        self.ensure_writable("write to it")

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

    def _may_create(self, path: Path) -> bool:
        """Ask before making folders for a database (a mistyped path would otherwise leave
        them behind); the data directory of a first start is made without asking."""
        answer = QMessageBox.question(
            self.window,
            "Create a run database?",
            f"The folder {path.parent} does not exist.\n\nCreate it and a new, empty run "
            f"database {path.name} in it?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        return answer == QMessageBox.StandardButton.Yes

    def _notice_later(self, notice: str) -> None:
        self._pending_notice = notice
        QTimer.singleShot(0, self._show_pending_notice)

    def _show_pending_notice(self) -> None:
        notice, self._pending_notice = self._pending_notice, None
        if notice:
            # The first sentence in the status bar (the dialog has all of it).
            self._status(notice.splitlines()[0].split("; ")[0])
            self._warn("Database", notice)

    def choose(self) -> None:
        """File › Open database…: pick a file, existing or new (its button says Open: a save
        dialog's "Save" read as if the file would be overwritten)."""
        start = str(self.store.path if self.store is not None else default_db_path())
        dialog = QFileDialog(self.window, "Open or create a run database", start, DB_FILTER)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptOpen)
        dialog.setFileMode(QFileDialog.FileMode.AnyFile)  # a new name starts a new database
        dialog.setLabelText(QFileDialog.DialogLabel.Accept, "Open")
        dialog.selectFile(start)
        if dialog.exec() == QFileDialog.DialogCode.Accepted and dialog.selectedFiles():
            self.open(dialog.selectedFiles()[0])

    def choose_import(self) -> Any:
        """File › Import runs…: pick another run database and copy its runs in."""
        start = str(self.store.path.parent if self.store is not None else Path.home())
        path, _ = QFileDialog.getOpenFileName(
            self.window,
            "Import runs from another database",
            start,
            "Run databases (*.db);;All files (*)",
        )
        return self.import_runs(path) if path else None

    def import_runs(self, path: str | Path) -> Any:
        """Copy the runs of the database at ``path`` into the open one (each run once, with its
        machine); the result, or None after a warning that says why nothing was imported."""
        from workbench.store.importer import import_runs

        if self.store is None or self._busy():
            self._warn("Import", "Open a database, and wait for the running job, to import.")
            return None
        if not self.ensure_writable("import runs into it"):
            return None
        try:
            result = import_runs(self.store, path)
        except (StoreError, OSError) as exc:
            self._warn("Import", f"Nothing was imported: {exc}")
            self._status(f"Nothing was imported from {path}")
            return None
        self._on_imported(result)
        self._status(result.line()[:1].upper() + result.line()[1:])
        return result

    def block_map(self, run_id: int, seq_len: int) -> Any:
        """The stored block map of one point (None: none, or the store failed: said)."""
        if self.store is None:
            return None
        try:
            return self.store.block_map(run_id, seq_len)
        except (StoreError, OSError) as exc:
            self._status(str(exc))
            return None
