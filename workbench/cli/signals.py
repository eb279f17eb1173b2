"""Ctrl-C and SIGTERM at the command line: each stops a command once, cleanly.

Imported first by :mod:`workbench.cli` (the package's ``__init__``), this module makes a Ctrl-C
that lands while the rest of the command line is still importing (its first ~0.15 s) a quiet
exit 130 instead of a ``KeyboardInterrupt`` traceback. While a command runs, the first Ctrl-C
(KeyboardInterrupt) or SIGTERM (:class:`Terminated`) stops it; a second one, back to back, is
ignored while the first is being handled, so it cannot cut short the write that stores the run
cancelled (the run was left "running") or escape the handler (the process died of the signal,
exit -2).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from workbench.run import stop_reason

EXIT_INTERRUPTED = 130
TERMINATED = "stopped by SIGTERM"  # a run's stored reason when SIGTERM stopped it


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be: every run on the way out is stored cancelled."""


# How long after a swallowed signal it is sent again: long enough for the main thread to have
# left the callback it landed in (sent from inside the hook, it would land in the hook).
REDELIVER_AFTER_S = 0.02


def _redelivered(exc: BaseException, signum: int, rearm: Callable[[], None]) -> BaseException:
    """``exc``, raised by a handler of ``signum``, marked so that :func:`_rescuing`'s hook can
    deliver the signal again should it land where Python swallows exceptions."""

    def send_again() -> None:
        rearm()
        main = threading.main_thread().ident
        if main is not None:
            signal.pthread_kill(main, signum)

    def again() -> None:
        timer = threading.Timer(REDELIVER_AFTER_S, send_again)
        timer.daemon = True
        timer.start()

    exc.redeliver = again  # type: ignore[attr-defined]
    return exc


def _rescuing(previous: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """An ``sys.unraisablehook`` for our handlers' exceptions: a signal that arrives while a
    weakref or GC callback runs (importlib's module locks have them) raises there, and Python
    prints "Exception ignored … KeyboardInterrupt" and carries on as if it never came. Such an
    exception is delivered again, in the code that runs next; any other goes to ``previous``."""

    def hook(unraisable: Any) -> None:
        again = getattr(unraisable.exc_value, "redeliver", None)
        if callable(again):
            again()
            return
        previous(unraisable)

    return hook


_said_interrupted: list[bool] = []


def _interrupted_while_starting(signum: int, frame: object) -> None:
    if not _said_interrupted:  # once, however often a swallowed one is delivered again
        _said_interrupted.append(True)
        with contextlib.suppress(OSError):
            os.write(2, b"interrupted\n")
    raise _redelivered(SystemExit(EXIT_INTERRUPTED), signum, lambda: None)


def _started_as_the_command() -> bool:
    """Is this process the ``fmha-workbench`` console script (or ``python -m workbench``)?
    Imported by a test or a script, their own Ctrl-C handling is left alone."""
    main = getattr(sys.modules.get("__main__"), "__file__", None) or ""
    name = os.path.basename(main)
    return name == "fmha-workbench" or main.endswith(os.path.join("workbench", "__main__.py"))


if threading.current_thread() is threading.main_thread() and _started_as_the_command():
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    sys.unraisablehook = _rescuing(sys.unraisablehook)


@contextlib.contextmanager
def stop_signals(*, sigterm: bool = True) -> Iterator[None]:
    """While the block runs, Ctrl-C raises KeyboardInterrupt and (``sigterm``) SIGTERM raises
    Terminated, each once between them; the handlers before are restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (a test calling main from a thread)
        return
    fired: list[bool] = []
    # A reason noted by an earlier command of this process is not this one's. It is not
    # cleared on the way out: the run a signal stopped may be closed after this block ends,
    # when the command's traceback lets its frames go.
    stop_reason.clear()

    def once(make: Callable[[], BaseException]) -> Callable[[int, object], None]:
        def handler(signum: int, frame: object) -> None:
            if fired:
                return  # a second signal while the first is handled: ignored
            fired.append(True)
            raise _redelivered(make(), signum, fired.clear)

        return handler

    previous: dict[int, Any] = {
        signal.SIGINT: signal.signal(signal.SIGINT, once(KeyboardInterrupt)),
    }
    if sigterm:

        def terminated() -> BaseException:
            stop_reason.note(TERMINATED)  # for a run closed in the consumer's frame
            return Terminated(TERMINATED)

        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, once(terminated))
    unraisable = sys.unraisablehook
    sys.unraisablehook = _rescuing(unraisable)
    try:
        yield
    finally:
        sys.unraisablehook = unraisable
        for number, handler in previous.items():
            if fired and _started_as_the_command():
                # The command is ending on a signal: a second one must not kill it while it
                # stores the run cancelled and prints why (the process died of it, exit -2).
                signal.signal(number, signal.SIG_IGN)
            else:
                signal.signal(number, handler if handler is not None else signal.SIG_DFL)


def ignore_stop_signals() -> None:
    """Ignore Ctrl-C and SIGTERM from here on: the command has finished and only exits. Python's
    shutdown resets a handler it set back to the default, so a signal in that last moment killed
    a process whose work was done (exit -2); an ignored signal it leaves ignored."""
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_IGN)
