"""The window's store calls that may wait on another program's write lock (opening a file,
relabel, delete) run in a worker thread while the window's event loop keeps turning, and the
status bar says what it waits for: the window never freezes for the store's lock (#51 item 6).

The caller still gets the call's result (or its exception) as if it had run in place: a nested
event loop waits for the worker. A write runs on a connection of its own, so the window's reads
during the wait never share a connection with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from PySide6.QtCore import QEventLoop, QObject, QThread, QTimer, Signal, Slot

T = TypeVar("T")
NOTICE_AFTER_MS = 150  # a call that takes longer than this is waiting: say so


class _Call(QObject):
    finished = Signal()

    def __init__(self, action: Callable[[], Any]) -> None:
        super().__init__()
        self.action = action
        self.result: Any = None
        self.error: BaseException | None = None

    @Slot()
    def run(self) -> None:
        try:
            self.result = self.action()
        except BaseException as exc:  # handed to the caller's thread, raised there
            self.error = exc
        finally:
            self.finished.emit()


def wait_off_thread(status: Callable[[str], None], waiting_for: str, action: Callable[[], T]) -> T:
    """``action()`` in a worker thread; the event loop runs meanwhile, and after a moment the
    status bar says "Waiting for ``waiting_for``…". Returns its result or raises its error."""
    thread = QThread()
    call = _Call(action)
    call.moveToThread(thread)
    loop = QEventLoop()
    call.finished.connect(loop.quit)  # queued to this thread: runs once exec() has begun
    thread.started.connect(call.run)
    notice = QTimer()
    notice.setSingleShot(True)
    notice.timeout.connect(lambda: status(f"Waiting for {waiting_for}…"))
    notice.start(NOTICE_AFTER_MS)
    thread.start()
    loop.exec()
    notice.stop()
    thread.quit()
    thread.wait()
    if call.error is not None:
        raise call.error
    return call.result


def install_lock_waits(store: Any, status: Callable[[str], None]) -> None:
    """Make ``store``'s writes the window calls in place (relabel, delete) wait off the GUI
    thread, saying so: another writer's lock is waited out with the window answering.

    The worker writes through a connection of its own (a second store on the same file), not
    ``store``'s: the event loop keeps running while it waits, and a read the window makes
    meanwhile (a click on a run loads its block map) would meet the worker's statement still
    in progress on a shared connection ("cannot open savepoint")."""
    waiting_for = f"another program to release its lock on {store.path}"
    for name in ("relabel", "delete_runs"):

        def waiting(*args: Any, _name: str = name) -> Any:
            return wait_off_thread(status, waiting_for, lambda: _write_apart(store, _name, args))

        setattr(store, name, waiting)


def _write_apart(store: Any, name: str, args: tuple[Any, ...]) -> Any:
    """``store.<name>(*args)`` through a fresh connection to its file, closed after."""
    twin = type(store)(store.path, busy_timeout_s=store.busy_timeout_s, upgrade=False)
    try:
        return getattr(twin, name)(*args)
    finally:
        twin.close()
