"""The window's store calls that may wait on another program's write lock (opening a file,
relabel, delete) run in a worker thread while the window's event loop keeps turning, and the
status bar says what it waits for: the window never freezes for the store's lock (#51 item 6).

The caller still gets the call's result (or its exception) as if it had run in place: a nested
event loop waits for the worker. The store's connections allow this hand-over between threads
(``check_same_thread=False``); only one thread uses a connection at a time.
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
    thread, saying so: another writer's lock is waited out with the window answering."""
    waiting_for = f"another program to release its lock on {store.path}"
    for name in ("relabel", "delete_runs"):
        method = getattr(store, name)

        def waiting(*args: Any, _method: Callable[..., Any] = method) -> Any:
            return wait_off_thread(status, waiting_for, lambda: _method(*args))

        setattr(store, name, waiting)
