"""Why this process is stopping, where a signal handler knows (the command line's SIGTERM).

A run's generator that is closed on the way out (GeneratorExit) cannot see the signal that
closed it: the signal raised in its consumer's frame. The handler notes its reason here first,
so the run is stored with it ("stopped by SIGTERM") rather than a generic word.
"""

from __future__ import annotations

_noted: list[str] = []


def note(reason: str) -> None:
    """Say why the process is stopping (cleared by :func:`clear`)."""
    _noted[:] = [reason]


def clear() -> None:
    _noted.clear()


def reason_or(default: str) -> str:
    """The noted reason, else ``default``."""
    return _noted[0] if _noted else default
